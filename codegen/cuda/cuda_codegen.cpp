#include "codegen/cuda/cuda_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "ir/error.h"
#include "ir/scalar_eval.h"

namespace kiln {

namespace {

// ---- dtype spellings ---------------------------------------------------------

// The C type a value lives in: narrow floats are held in f32.
std::string reg_type(DType t) {
  switch (t) {
    case DType::i8: return "signed char";
    case DType::u8: return "unsigned char";
    case DType::i16: return "short";
    case DType::u16: return "unsigned short";
    case DType::i32: return "int";
    case DType::u32: return "unsigned";
    case DType::i64: return "long long";
    case DType::boolean: return "bool";
    default: return "float";
  }
}

// The element type of a buffer in memory.
std::string mem_type(DType t) {
  switch (t) {
    case DType::f16: return "__half";
    case DType::bf16: return "__nv_bfloat16";
    case DType::f8e4m3: return "__nv_fp8_e4m3";
    case DType::f8e5m2: return "__nv_fp8_e5m2";
    case DType::boolean: return "unsigned char";
    default: return reg_type(t);
  }
}

// The unsigned type integer arithmetic wraps in.
std::string wrap_type(DType t) { return t == DType::i64 ? "unsigned long long" : "unsigned"; }

// The type reductions and shuffles accumulate in (CUDA shuffles no narrower
// integer than int).
std::string acc_type(DType t) {
  if (is_float(t)) return "float";
  if (t == DType::i64) return "long long";
  if (t == DType::u32) return "unsigned";
  return "int";
}

// The raw storage bits of an element in shared memory for a bitcast.
std::string bits_type(DType t) {
  switch (t) {
    case DType::f32: return "unsigned";
    case DType::f16:
    case DType::bf16: return "unsigned short";
    case DType::f8e4m3:
    case DType::f8e5m2:
    case DType::boolean: return "unsigned char";
    default: return reg_type(t);
  }
}

int reg_bytes(DType t) {
  if (t == DType::i64) return 8;
  if (is_float(t)) return 4;
  return dtype_bytes(t);
}

// The dtype whose literals spell an accumulator of acc_type(t).
DType acc_dtype(DType t) {
  if (t == DType::i64 || t == DType::u32) return t;
  return DType::i32;
}

// The name helpers in the prelude carry: kiln_rn_f16, kiln_bf16_bits, ...
std::string suffix(DType t) { return std::string(dtype_name(t)); }

// Narrow floats are rounded after every op.
std::string rounded(DType t, const std::string& e) {
  if (!is_narrow_float(t)) return e;
  return "kiln_rn_" + suffix(t) + "(" + e + ")";
}

std::string float_literal(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (!std::isfinite(f)) {
    char b[40];
    std::snprintf(b, sizeof b, "__uint_as_float(0x%08xu)", u);
    return b;
  }
  char b[48];
  std::snprintf(b, sizeof b, "%af", static_cast<double>(f));
  return b;
}

std::string int_literal(int64_t v, DType t) {
  if (t == DType::boolean) return v ? "true" : "false";
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  return "(" + reg_type(t) + ")" + std::to_string(v) + "LL";
}

std::string literal(DType t, int64_t ival, double fval) {
  ScalarValue c = const_value(t, ival, fval);
  return is_float(t) ? float_literal(static_cast<float>(c.f)) : int_literal(c.i, t);
}

// Bits of a value of dtype t (as an unsigned expression) and back.
std::string to_bits(DType t, const std::string& x) {
  switch (t) {
    case DType::f32: return "__float_as_uint(" + x + ")";
    case DType::f16:
    case DType::bf16:
    case DType::f8e4m3:
    case DType::f8e5m2: return "kiln_" + suffix(t) + "_bits(" + x + ")";
    default: return "(" + wrap_type(t) + ")(" + x + ")";
  }
}

std::string from_bits(DType t, const std::string& b) {
  switch (t) {
    case DType::f32: return "__uint_as_float((unsigned)(" + b + "))";
    case DType::f16:
    case DType::bf16: return "kiln_" + suffix(t) + "_from_bits((unsigned short)(" + b + "))";
    case DType::f8e4m3:
    case DType::f8e5m2: return "kiln_" + suffix(t) + "_from_bits((unsigned char)(" + b + "))";
    default: return "(" + reg_type(t) + ")(" + b + ")";
  }
}

std::string load_expr(DType t, const std::string& at) {
  switch (t) {
    case DType::f16: return "__half2float(" + at + ")";
    case DType::bf16: return "__bfloat162float(" + at + ")";
    case DType::f8e4m3:
    case DType::f8e5m2: return "kiln_from_" + suffix(t) + "(" + at + ")";
    case DType::boolean: return "(" + at + " != 0)";
    default: return at;
  }
}

std::string store_expr(DType t, const std::string& v) {
  switch (t) {
    case DType::f16: return "__float2half_rn(" + v + ")";
    case DType::bf16: return "__float2bfloat16_rn(" + v + ")";
    case DType::f8e4m3:
    case DType::f8e5m2: return "kiln_to_" + suffix(t) + "(" + v + ")";
    case DType::boolean: return "(unsigned char)(" + v + " ? 1 : 0)";
    default: return v;
  }
}

// ---- the emitter ---------------------------------------------------------------

class Emitter {
 public:
  Emitter(const Kernel& k, const CudaOptions& o) : k_(k), o_(o), T_(o.num_warps * 32) {}

  CudaSource run() {
    if (o_.num_warps < 1 || o_.num_warps > 32)
      throw Error("CUDA codegen of kernel '" + k_.name + "': num_warps " +
                  std::to_string(o_.num_warps) + " is outside 1..32");
    CudaSource s;
    s.entry = k_.name;
    s.threads = T_;
    s.sm = o_.sm;
    std::string sig, unpack;
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Param& p = k_.params[i];
      std::string decl = p.kind == ParamKind::Buffer ? mem_type(p.dtype) + "* " + pname(i)
                                                     : reg_type(p.dtype) + " " + pname(i);
      sig += (i ? ", " : "") + decl;
      std::string ty = p.kind == ParamKind::Buffer ? mem_type(p.dtype) + "*" : reg_type(p.dtype);
      unpack += std::string(i ? ", " : "") + "*(" + ty + " const*)a[" + std::to_string(i) + "]";
    }
    find_hazards(k_.body);
    // Scratch arrays take the start of the block's shared memory, each
    // 16-byte aligned; the staging of tile ops goes after them.
    for (const Scratch& sc : k_.scratch) {
      scratch_at_.push_back(smem_);
      s.scratch.push_back({sc.name, smem_, sc.elems * dtype_bytes(sc.dtype)});
      smem_ += (sc.elems * dtype_bytes(sc.dtype) + 15) / 16 * 16;
    }
    staging_at_ = smem_;
    line("const int tid = threadIdx.x;");
    line("const int lane = tid & 31, warp = tid >> 5;");
    line("(void)lane; (void)warp;");
    line("KILN_DECLARE_SHARED;");
    line("(void)kiln_smem;");
    for (size_t v = 0; v < k_.vars.size(); ++v)
      line(decl(k_.vars[v], "var" + std::to_string(v)) + ";");
    block(k_.body);
    flush();
    s.shared_bytes = smem_;
    s.uses_mma = uses_mma_;
    s.code = "// Kiln: kernel " + k_.name + ", " + std::to_string(T_) + " threads per block, " +
             std::to_string(smem_) + " bytes of dynamic shared memory.\n" +
             "#include \"kiln_cuda.cuh\"\n\n" + tables_ +
             "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(T_) + ") " +
             k_.name + "(" + sig + ") {\n" + body_ + "}\n" +
             "\n#ifdef KILN_SIM\nextern \"C\" void kiln_sim_thread(void* const* a) {\n  " +
             k_.name + "(" + unpack + ");\n}\n#endif\n";
    return s;
  }

 private:
  // ---- writing ----------------------------------------------------------------

  // Statements go out in order, except that consecutive per-element
  // statements over tiles of one size share one loop (see each()), so
  // `x * w + b` over a tile reads as one loop, not three.
  void line(const std::string& s) {
    flush();
    put(s);
  }
  void put(const std::string& s) {
    body_.append(static_cast<size_t>(indent_ * 2 + 2), ' ');
    body_ += s;
    body_ += '\n';
  }
  // A declaration may precede the loop that fills it, so it does not end one.
  void declare(const std::string& s) { put(s); }

  // Writes out the pending per-element statements as one loop.
  void flush() {
    if (capturing_ || pending_n_ < 0) return;
    int64_t n = pending_n_;
    std::string stmts = std::move(pending_);
    pending_n_ = -1;
    pending_.clear();
    put("#pragma unroll");
    put("for (int e = 0; e < " + std::to_string(per_thread(n)) + "; ++e) {");
    ++indent_;
    put("const int j = tid + e * " + std::to_string(T_) + ";");
    put("(void)j;");
    bool guard = n % T_ != 0;
    if (guard) {
      put("if (j < " + std::to_string(n) + ") {");
      ++indent_;
    }
    std::string pad(static_cast<size_t>(indent_ * 2), ' ');
    for (size_t at = 0; at < stmts.size();) {
      size_t end = stmts.find('\n', at);
      body_ += pad + stmts.substr(at, end - at + 1);
      at = end + 1;
    }
    if (guard) {
      --indent_;
      put("}");
    }
    --indent_;
    put("}");
  }
  void open(const std::string& s) {
    line(s.empty() ? "{" : s + " {");
    ++indent_;
  }
  void close() {
    flush();
    --indent_;
    line("}");
  }

  [[noreturn]] void unsupported(const Op& op, const std::string& why) const {
    throw Error("CUDA codegen of kernel '" + k_.name + "': op " + std::string(op_name(op.kind)) +
                " " + why + " is not supported by the CUDA lowering");
  }

  static std::string pname(size_t i) { return "p" + std::to_string(i); }
  static std::string vname(int id) { return "v" + std::to_string(id); }
  const Type& ty(int id) const { return k_.values.at(static_cast<size_t>(id)); }
  int64_t per_thread(int64_t n) const { return (n + T_ - 1) / T_; }

  std::string decl(const Type& t, const std::string& name) const {
    if (t.is_scalar()) return reg_type(t.dtype) + " " + name;
    return reg_type(t.dtype) + " " + name + "[" + std::to_string(per_thread(t.numel())) + "]";
  }

  // Element e of value id (or variable v) in the current per-element loop.
  std::string el(int id) const { return ty(id).is_scalar() ? vname(id) : vname(id) + "[e]"; }
  std::string var_el(int64_t v) const {
    std::string name = "var" + std::to_string(v);
    return k_.vars[v].is_scalar() ? name : name + "[e]";
  }

  // A loop over the elements this thread owns of an n-element tile; inside,
  // `e` indexes the register array and `j` is the flat element index.
  void for_owned(int64_t n, const std::function<void()>& body) {
    flush();
    capture(n, body);
    flush();
  }

  // Runs `body` once per element of value `id` (or once for a scalar). For
  // a tile the statements join the pending loop over tiles of its size.
  void each(int id, const std::function<void()>& body) {
    if (ty(id).is_scalar()) return body();
    int64_t n = ty(id).numel();
    if (pending_n_ != n) flush();
    capture(n, body);
  }

  // Appends what `body` writes to the pending loop over n elements.
  void capture(int64_t n, const std::function<void()>& body) {
    pending_n_ = n;
    std::string saved = std::move(body_);
    body_.clear();
    int saved_indent = indent_;
    indent_ = 0;
    capturing_ = true;
    body();
    capturing_ = false;
    pending_ += body_;
    body_ = std::move(saved);
    indent_ = saved_indent;
  }

  void need_smem(int64_t bytes) { smem_ = std::max(smem_, staging_at_ + (bytes + 15) / 16 * 16); }

  // Staging in shared memory of `type` starting at byte `offset`.
  std::string smem_ptr(const std::string& type, int64_t offset) const {
    return "((" + type + "*)(kiln_smem + " + std::to_string(staging_at_ + offset) + "))";
  }

  // The memory a memory op names: a buffer parameter, or a scratch array
  // in shared memory.
  std::string memory(int64_t ival) const {
    if (!is_scratch_ref(ival)) return pname(static_cast<size_t>(ival));
    int s = scratch_index(ival);
    return "((" + mem_type(k_.scratch[s].dtype) + "*)(kiln_smem + " +
           std::to_string(scratch_at_[s]) + "))";
  }

  // Row-major coordinates of flat index j in `shape` mapped through strides.
  static std::string gather_index(const Shape& shape, const std::vector<int64_t>& strides,
                                  int64_t base) {
    std::string s = std::to_string(base);
    int64_t inner = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      if (strides[d] != 0 && shape[d] != 1) {
        std::string c = "(j / " + std::to_string(inner) + " % " + std::to_string(shape[d]) + ")";
        s += " + " + c + " * " + std::to_string(strides[d]);
      }
      inner *= shape[d];
    }
    return s;
  }

  // Moves elements between threads: every thread writes the input elements
  // it owns to shared memory, then reads the ones its outputs need.
  void exchange(const Op& op, const std::string& src_index) {
    int x = op.args[0];
    std::string rt = reg_type(ty(x).dtype);
    need_smem(ty(x).numel() * reg_bytes(ty(x).dtype));
    open("");
    line(rt + "* kiln_x = " + smem_ptr(rt, 0) + ";");
    for_owned(ty(x).numel(), [&] { line("kiln_x[j] = " + vname(x) + "[e];"); });
    line("__syncthreads();");
    for_owned(ty(op.result).numel(),
              [&] { line(vname(op.result) + "[e] = kiln_x[" + src_index + "];"); });
    line("__syncthreads();");
    close();
  }

  // A tile op reads or writes all its elements at once, but here each thread
  // does its own: when a kernel both reads and writes a buffer (in place),
  // another thread may still need the old value this thread is about to
  // overwrite, or not yet see the new one. Every access to such a buffer is
  // therefore preceded by a block barrier (control flow is uniform across
  // the block, so every thread reaches it).
  void find_hazards(const Block& b) {
    std::vector<bool> loaded(k_.params.size()), stored(k_.params.size());
    std::function<void(const Block&)> scan = [&](const Block& blk) {
      for (const Op& op : blk.ops) {
        bool buffer = !is_scratch_ref(op.ival);  // scratch arrays always synchronise
        if (op.kind == OpKind::Load && buffer) loaded[op.ival] = true;
        if ((op.kind == OpKind::Store || is_atomic(op.kind)) && buffer) stored[op.ival] = true;
        for (const Block& r : op.regions) scan(r);
      }
    };
    scan(b);
    hazard_.resize(k_.params.size());
    for (size_t i = 0; i < hazard_.size(); ++i) hazard_[i] = loaded[i] && stored[i];
  }

  void sync_if_hazard(int64_t memory) {
    if (is_scratch_ref(memory))
      line("__syncthreads();  // scratch array: order against other threads");
    else if (hazard_[memory])
      line("__syncthreads();  // in-place buffer: order against other threads");
  }

  // ---- ops ----------------------------------------------------------------------

  void block(const Block& b) {
    for (const Op& op : b.ops) emit(op);
  }

  void emit(const Op& op) {
    if (op.result >= 0 && op.kind != OpKind::For)
      declare(decl(ty(op.result), vname(op.result)) + ";");
    switch (op.kind) {
      case OpKind::Const: {
        std::string c = literal(ty(op.result).dtype, op.ival, op.fval);
        return each(op.result, [&] { line(el(op.result) + " = " + c + ";"); });
      }
      case OpKind::Arange: return each(op.result, [&] { line(el(op.result) + " = j;"); });
      case OpKind::ProgramId:
      case OpKind::NumPrograms: {
        const char* axis[] = {"x", "y", "z"};
        std::string src = op.kind == OpKind::ProgramId ? "blockIdx." : "gridDim.";
        return line(vname(op.result) + " = (" + reg_type(ty(op.result).dtype) + ")" + src +
                    axis[op.ival] + ";");
      }
      case OpKind::Param: return line(vname(op.result) + " = " + pname(op.ival) + ";");
      case OpKind::Broadcast: return emit_broadcast(op);
      case OpKind::Reshape:
        if (ty(op.result).is_scalar() && !ty(op.args[0]).is_scalar())
          return line(vname(op.result) + " = " + from_thread0(op.args[0]) + ";");
        return each(op.result, [&] { line(el(op.result) + " = " + el(op.args[0]) + ";"); });
      case OpKind::Transpose: {
        const Shape& si = ty(op.args[0]).shape;
        return exchange(op, gather_index(ty(op.result).shape, {1, si[1]}, 0));
      }
      case OpKind::Slice: {
        const Shape& si = ty(op.args[0]).shape;
        std::vector<int64_t> st = row_major_strides(si);
        int64_t base = 0;
        for (size_t d = 0; d < si.size(); ++d) base += op.ints[d] * st[d];
        return exchange(op, gather_index(ty(op.result).shape, st, base));
      }
      case OpKind::Load: return emit_load(op);
      // A CPU cache hint: a GPU hides memory latency with the warps it keeps
      // in flight instead.
      case OpKind::Prefetch: return;
      case OpKind::Store:
      case OpKind::AtomicAdd:
      case OpKind::AtomicMax:
      case OpKind::AtomicMin:
      case OpKind::AtomicXchg: return emit_write(op);
      case OpKind::ReduceSum:
      case OpKind::ReduceMax:
      case OpKind::ReduceMin:
      case OpKind::ArgMax: return emit_reduce(op);
      case OpKind::Dot: return emit_dot(op);
      case OpKind::DotGroups: return emit_dot_groups(op);
      case OpKind::Lookup: return emit_lookup(op);
      case OpKind::For: return emit_for(op);
      case OpKind::If:
        open("if (" + vname(op.args[0]) + ")");
        block(op.regions[0]);
        close();
        if (op.regions.size() == 2 && !op.regions[1].ops.empty()) {
          open("else");
          block(op.regions[1]);
          close();
        }
        return;
      case OpKind::VarDecl:
      case OpKind::VarStore:
        return each(op.args[0], [&] { line(var_el(op.ival) + " = " + el(op.args[0]) + ";"); });
      case OpKind::VarLoad:
        return each(op.result, [&] { line(el(op.result) + " = " + var_el(op.ival) + ";"); });
      case OpKind::Bitcast:
        if (dtype_bits(ty(op.args[0]).dtype) != dtype_bits(ty(op.result).dtype))
          return emit_view(op);
        [[fallthrough]];
      default: return emit_elementwise(op);
    }
  }

  // A one-element tile lives in thread 0; this hands its value to every
  // thread and returns the name of the local holding it.
  std::string from_thread0(int x) {
    need_smem(16);
    std::string rt = reg_type(ty(x).dtype), name = "kiln_t" + std::to_string(tmp_++);
    line(rt + " " + name + ";");
    line("if (tid == 0) " + smem_ptr(rt, 0) + "[0] = " + vname(x) + "[0];");
    line("__syncthreads();");
    line(name + " = " + smem_ptr(rt, 0) + "[0];");
    line("__syncthreads();");
    return name;
  }

  void emit_broadcast(const Op& op) {
    int x = op.args[0];
    if (ty(x).is_scalar())
      return each(op.result, [&] { line(el(op.result) + " = " + vname(x) + ";"); });
    if (ty(x).numel() == 1) {
      std::string b = from_thread0(x);
      return each(op.result, [&] { line(el(op.result) + " = " + b + ";"); });
    }
    if (ty(x).numel() == ty(op.result).numel())  // only size-1 axes added
      return each(op.result, [&] { line(el(op.result) + " = " + el(x) + ";"); });
    const Shape& si = ty(x).shape;
    const Shape& so = ty(op.result).shape;
    std::vector<int64_t> st = row_major_strides(si), bst(so.size(), 0);
    size_t lead = so.size() - si.size();
    for (size_t d = 0; d < si.size(); ++d) bst[lead + d] = si[d] == 1 ? 0 : st[d];
    exchange(op, gather_index(so, bst, 0));
  }

  // A width-changing bitcast: the tile's bytes, reread in the new dtype.
  void emit_view(const Op& op) {
    int x = op.args[0];
    DType ti = ty(x).dtype, to = ty(op.result).dtype;
    need_smem(ty(x).numel() * dtype_bytes(ti));
    open("");
    for_owned(ty(x).numel(), [&] {
      line(smem_ptr(bits_type(ti), 0) + "[j] = (" + bits_type(ti) + ")" + to_bits(ti, el(x)) + ";");
    });
    line("__syncthreads();");
    for_owned(ty(op.result).numel(), [&] {
      line(vname(op.result) + "[e] = " + from_bits(to, smem_ptr(bits_type(to), 0) + "[j]") + ";");
    });
    line("__syncthreads();");
    close();
  }

  std::string elementwise_expr(const Op& op, DType in, DType out,
                               const std::vector<std::string>& a) {
    const std::string& x = a[0];
    if (op.kind == OpKind::Select) return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
    if (op.kind == OpKind::Cast) return cast_expr(in, out, x);
    if (op.kind == OpKind::Bitcast) {
      if (in == DType::boolean || out == DType::boolean) unsupported(op, "on bool");
      return from_bits(out, to_bits(in, x));
    }
    std::string y = a.size() > 1 ? a[1] : "";
    switch (op.kind) {
      case OpKind::Eq: return "(" + x + " == " + y + ")";
      case OpKind::Ne: return "(" + x + " != " + y + ")";
      case OpKind::Lt: return "(" + x + " < " + y + ")";
      case OpKind::Le: return "(" + x + " <= " + y + ")";
      case OpKind::Gt: return "(" + x + " > " + y + ")";
      case OpKind::Ge: return "(" + x + " >= " + y + ")";
      default: break;
    }
    if (is_float(in)) {
      std::string r;
      switch (op.kind) {
        case OpKind::Add: r = x + " + " + y; break;
        case OpKind::Sub: r = x + " - " + y; break;
        case OpKind::Mul: r = x + " * " + y; break;
        case OpKind::Div: r = x + " / " + y; break;
        case OpKind::Rem: r = "fmodf(" + x + ", " + y + ")"; break;
        case OpKind::Min: r = "fminf(" + x + ", " + y + ")"; break;
        case OpKind::Max: r = "fmaxf(" + x + ", " + y + ")"; break;
        case OpKind::Neg: r = "-" + x; break;
        case OpKind::Abs: r = "fabsf(" + x + ")"; break;
        case OpKind::Floor: r = "floorf(" + x + ")"; break;
        case OpKind::Exp: r = "expf(" + x + ")"; break;
        case OpKind::Exp2: r = "exp2f(" + x + ")"; break;
        case OpKind::Log: r = "logf(" + x + ")"; break;
        case OpKind::Log2: r = "log2f(" + x + ")"; break;
        case OpKind::Sqrt: r = "sqrtf(" + x + ")"; break;
        case OpKind::Rsqrt: r = "rsqrtf(" + x + ")"; break;
        case OpKind::Tanh: r = "tanhf(" + x + ")"; break;
        case OpKind::Sigmoid: r = "1.0f / (1.0f + expf(-" + x + "))"; break;
        case OpKind::Erf: r = "erff(" + x + ")"; break;
        case OpKind::Fma: r = "fmaf(" + x + ", " + y + ", " + a[2] + ")"; break;
        default: unsupported(op, "on " + std::string(dtype_name(in)));
      }
      return rounded(in, "(" + r + ")");
    }
    if (in == DType::boolean) {
      switch (op.kind) {
        case OpKind::And: return "(" + x + " && " + y + ")";
        case OpKind::Or: return "(" + x + " || " + y + ")";
        case OpKind::Xor: return "(" + x + " != " + y + ")";
        case OpKind::Not: return "(!" + x + ")";
        default: unsupported(op, "on bool");
      }
    }
    std::string t = reg_type(in), u = wrap_type(in);
    std::string ux = "(" + u + ")(" + x + ")", uy = "(" + u + ")(" + y + ")";
    auto wrap = [&](const std::string& e) { return "(" + t + ")(" + e + ")"; };
    std::string shift = "(" + uy + " & " + std::to_string(dtype_bits(in) - 1) + "u)";
    bool sg = is_signed_int(in);
    switch (op.kind) {
      case OpKind::Add: return wrap(ux + " + " + uy);
      case OpKind::Sub: return wrap(ux + " - " + uy);
      case OpKind::Mul: return wrap(ux + " * " + uy);
      case OpKind::Div:
        return sg ? wrap("kiln_sdiv(" + x + ", " + y + ")")
                  : "(" + y + " == 0 ? (" + t + ")0 : " + wrap(x + " / " + y) + ")";
      case OpKind::Rem:
        return sg ? wrap("kiln_srem(" + x + ", " + y + ")")
                  : "(" + y + " == 0 ? (" + t + ")0 : " + wrap(x + " % " + y) + ")";
      case OpKind::Min: return "(" + x + " < " + y + " ? " + x + " : " + y + ")";
      case OpKind::Max: return "(" + x + " > " + y + " ? " + x + " : " + y + ")";
      case OpKind::And: return wrap(ux + " & " + uy);
      case OpKind::Or: return wrap(ux + " | " + uy);
      case OpKind::Xor: return wrap(ux + " ^ " + uy);
      case OpKind::Shl: return wrap(ux + " << " + shift);
      case OpKind::Shr:
        // Arithmetic for signed dtypes (promotion keeps the sign), logical
        // for unsigned ones.
        return sg ? wrap("(" + (in == DType::i64 ? t : std::string("int")) + ")(" + x + ") >> " +
                         shift)
                  : wrap(ux + " >> " + shift);
      case OpKind::Neg: return wrap("(" + u + ")0 - " + ux);
      case OpKind::Abs: return "(" + x + " < 0 ? " + wrap("(" + u + ")0 - " + ux) + " : " + x + ")";
      case OpKind::Not: return wrap("~" + ux);
      case OpKind::Floor: return x;
      case OpKind::Fma: return wrap(ux + " * " + uy + " + (" + u + ")(" + a[2] + ")");
      default: unsupported(op, "on " + std::string(dtype_name(in)));
    }
  }

  static std::string cast_expr(DType in, DType out, const std::string& x) {
    if (in == out) return x;
    if (is_float(in)) {
      if (is_float(out)) return rounded(out, x);
      if (out == DType::boolean) return "(" + x + " != 0.0f)";
      double hi_excl = std::ldexp(1.0, is_signed_int(out) ? dtype_bits(out) - 1 : dtype_bits(out));
      char b[32];
      std::snprintf(b, sizeof b, "%a", hi_excl);
      return "(" + reg_type(out) + ")kiln_f2i(" + x + ", " + int_literal(int_min(out), DType::i64) +
             ", " + int_literal(int_max(out), DType::i64) + ", " + b + ")";
    }
    if (is_float(out)) return rounded(out, "(float)(" + x + ")");
    if (out == DType::boolean) return "(" + x + " != 0)";
    return "(" + reg_type(out) + ")(" + x + ")";
  }

  void emit_elementwise(const Op& op) {
    DType in = ty(op.args.back()).dtype, out = ty(op.result).dtype;
    each(op.result, [&] {
      std::vector<std::string> a;
      for (int id : op.args) a.push_back(el(id));
      line(el(op.result) + " = " + elementwise_expr(op, in, out, a) + ";");
    });
  }

  void emit_load(const Op& op) {
    sync_if_hazard(op.ival);
    DType t = memory_dtype(k_, op.ival);
    std::string at = "KILN_AT(" + memory(op.ival) + ", " + el(op.args[0]) + ")";
    std::string v = load_expr(t, at);
    if (op.args.size() == 3) v = el(op.args[1]) + " ? " + v + " : " + el(op.args[2]);
    each(op.result, [&] { line(el(op.result) + " = " + v + ";"); });
  }

  std::string atomic_call(const Op& op, DType t, const std::string& at, const std::string& v) {
    std::string p = "&" + at;
    bool i64 = t == DType::i64;
    std::string ull = "(unsigned long long*)" + p;
    bool plain = t == DType::f32 || t == DType::i32 || t == DType::u32 || i64;
    if (!plain) unsupported(op, "on " + std::string(dtype_name(t)));
    switch (op.kind) {
      case OpKind::AtomicAdd:
        return i64 ? "(long long)atomicAdd(" + ull + ", (unsigned long long)" + v + ")"
                   : "atomicAdd(" + p + ", " + v + ")";
      case OpKind::AtomicXchg:
        return i64 ? "(long long)atomicExch(" + ull + ", (unsigned long long)" + v + ")"
                   : "atomicExch(" + p + ", " + v + ")";
      default: {
        bool mx = op.kind == OpKind::AtomicMax;
        if (t == DType::f32)
          return std::string(mx ? "kiln_atomic_max_f32(" : "kiln_atomic_min_f32(") + p + ", " + v +
                 ")";
        return std::string(mx ? "atomicMax(" : "atomicMin(") + p + ", " + v + ")";
      }
    }
  }

  void emit_write(const Op& op) {
    sync_if_hazard(op.ival);
    DType t = memory_dtype(k_, op.ival);
    int off = op.args[0], val = op.args[1];
    bool masked = op.args.size() == 3;
    std::string at = "KILN_AT_W(" + memory(op.ival) + ", " + el(off) + ")";
    bool scalar = ty(off).is_scalar();
    if (op.kind == OpKind::Store) {
      // A scalar store is made once per block, by thread 0.
      std::string cond = scalar ? "tid == 0" : "";
      if (masked) cond += (cond.empty() ? "" : " && ") + el(op.args[2]);
      std::string s = at + " = " + store_expr(t, el(val)) + ";";
      return each(off, [&] { line(cond.empty() ? s : "if (" + cond + ") " + s); });
    }
    std::string call = atomic_call(op, t, at, el(val));
    std::string rt = reg_type(t);
    if (scalar) {
      // Thread 0 performs it; everyone receives the old value.
      need_smem(16);
      std::string cond = "tid == 0" + (masked ? " && " + el(op.args[2]) : "");
      line(smem_ptr(rt, 0) + "[0] = 0;");
      line("__syncthreads();");
      line("if (" + cond + ") " + smem_ptr(rt, 0) + "[0] = " + call + ";");
      line("__syncthreads();");
      line(vname(op.result) + " = " + smem_ptr(rt, 0) + "[0];");
      line("__syncthreads();");
      return;
    }
    each(off, [&] {
      if (masked)
        line(el(op.result) + " = " + el(op.args[2]) + " ? " + call + " : (" + rt + ")0;");
      else
        line(el(op.result) + " = " + call + ";");
    });
  }

  // Each table is a constant array at file scope, written once per kernel
  // however many lookups read it; each element reads its own entry.
  void emit_lookup(const Op& op) {
    DType t = ty(op.result).dtype;
    auto [it, fresh] = table_names_.try_emplace({t, op.ints}, "");
    if (fresh) {
      it->second = "kiln_table" + std::to_string(table_names_.size() - 1);
      std::string entries;
      for (size_t i = 0; i < op.ints.size(); ++i) {
        entries += i % 16 ? ", " : i ? ",\n    " : "\n    ";
        int64_t v = op.ints[i];
        // A 64-bit entry needs a 64-bit literal, and the most negative one
        // has none.
        if (t != DType::i64)
          entries += std::to_string(v);
        else if (v == std::numeric_limits<int64_t>::min())
          entries += "(-9223372036854775807LL - 1)";
        else
          entries += std::to_string(v) + "LL";
      }
      tables_ += "static __device__ const " + reg_type(t) + " " + it->second + "[" +
                 std::to_string(op.ints.size()) + "] = {" + entries + "};\n\n";
    }
    std::string call =
        "kiln_lookup(" + it->second + ", " + std::to_string(op.ints.size()) + "ull, ";
    each(op.result, [&] { line(el(op.result) + " = " + call + el(op.args[0]) + ");"); });
  }

  // ---- reductions -------------------------------------------------------------

  struct Combine {
    std::string acc;       // accumulator C type
    std::string identity;  // value of an empty reduction
  };

  Combine combine_of(const Op& op, DType t) const {
    Combine c{acc_type(t), ""};
    bool fl = is_float(t);
    switch (op.kind) {
      case OpKind::ReduceSum: c.identity = fl ? "0.0f" : "0"; break;
      // fmaxf/fminf skip NaN, so a NaN start is the identity (and the
      // result of an all-NaN row, as in the interpreter).
      case OpKind::ReduceMax:
        c.identity = fl ? "__uint_as_float(0x7fc00000u)" : int_literal(int_min(t), acc_dtype(t));
        break;
      case OpKind::ReduceMin:
        c.identity = fl ? "__uint_as_float(0x7fc00000u)" : int_literal(int_max(t), acc_dtype(t));
        break;
      default: c.identity = fl ? "0.0f" : "0"; break;  // ArgMax: value unused while idx < 0
    }
    return c;
  }

  // acc = acc (+) x, for the reduction kind. For ArgMax `acc_i`/`x_i` are
  // the indices (-1: none yet); NaN elements never enter.
  std::string combine_stmt(const Op& op, DType t, const std::string& acc, const std::string& x,
                           const std::string& acc_i = "", const std::string& x_i = "") const {
    bool fl = is_float(t);
    switch (op.kind) {
      case OpKind::ReduceSum:
        if (fl) return acc + " += " + x + ";";
        return acc + " = (" + acc_type(t) + ")((" + wrap_type(t) + ")" + acc + " + (" +
               wrap_type(t) + ")" + x + ");";
      case OpKind::ReduceMax:
        return fl ? acc + " = fmaxf(" + acc + ", " + x + ");"
                  : acc + " = " + x + " > " + acc + " ? " + x + " : " + acc + ";";
      case OpKind::ReduceMin:
        return fl ? acc + " = fminf(" + acc + ", " + x + ");"
                  : acc + " = " + x + " < " + acc + " ? " + x + " : " + acc + ";";
      default: {
        std::string better = "(" + x_i + " >= 0 && (" + acc_i + " < 0 || " + x + " > " + acc +
                             " || (" + x + " == " + acc + " && " + x_i + " < " + acc_i + ")))";
        return "if " + better + " { " + acc + " = " + x + "; " + acc_i + " = " + x_i + "; }";
      }
    }
  }

  // Adds element `x` at index `idx` of the reduced axis into the partial.
  void accumulate(const Op& op, DType t, const std::string& x, const std::string& idx) {
    if (op.kind != OpKind::ArgMax) return line(combine_stmt(op, t, "kiln_p", x));
    std::string guard = is_float(t) ? "if (!(" + x + " != " + x + ")) " : "";
    line(guard + combine_stmt(op, t, "kiln_p", "(" + acc_type(t) + ")" + x, "kiln_pi", idx));
  }

  // Combines partials across the lanes of groups of `width` with shuffles.
  void shuffle_reduce(const Op& op, DType t, int width) {
    for (int off = width / 2; off >= 1; off /= 2) {
      std::string o = std::to_string(off);
      line("{");
      line("  " + acc_type(t) + " kiln_o = __shfl_xor_sync(0xffffffffu, kiln_p, " + o + ");");
      if (op.kind == OpKind::ArgMax) {
        line("  int kiln_oi = __shfl_xor_sync(0xffffffffu, kiln_pi, " + o + ");");
        line("  " + combine_stmt(op, t, "kiln_p", "kiln_o", "kiln_pi", "kiln_oi"));
      } else {
        line("  " + combine_stmt(op, t, "kiln_p", "kiln_o"));
      }
      line("}");
    }
  }

  std::string reduce_result(const Op& op, DType t, DType tout, const std::string& p,
                            const std::string& pi) const {
    if (op.kind == OpKind::ArgMax) return "(" + pi + " < 0 ? 0 : " + pi + ")";
    if (is_float(t)) return rounded(tout, p);
    return "(" + reg_type(tout) + ")" + p;
  }

  void emit_reduce(const Op& op) {
    int x = op.args[0];
    const Type& tx = ty(x);
    DType t = tx.dtype, tout = ty(op.result).dtype;
    bool argmax = op.kind == OpKind::ArgMax;
    int64_t axis = op.ival, outer = 1, inner = 1, len = tx.shape[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= tx.shape[d];
    for (int64_t d = axis + 1; d < tx.rank(); ++d) inner *= tx.shape[d];
    int64_t n_out = outer * inner;
    Combine c = combine_of(op, t);
    std::string at = c.acc;
    int nw = o_.num_warps;
    open("");
    if (n_out == 1) {
      // Everything into one value: per-thread partials from registers, a
      // shuffle tree per warp, then the warps' results through shared memory.
      need_smem(nw * 16);
      line(at + " kiln_p = " + c.identity + ";");
      if (argmax) line("int kiln_pi = -1;");
      for_owned(tx.numel(), [&] { accumulate(op, t, vname(x) + "[e]", "j"); });
      shuffle_reduce(op, t, 32);
      line("if (lane == 0) " + smem_ptr(at, 0) + "[warp] = kiln_p;");
      if (argmax) line("if (lane == 0) " + smem_ptr("int", nw * 8) + "[warp] = kiln_pi;");
      line("__syncthreads();");
      line("kiln_p = " + c.identity + ";");
      if (argmax) line("kiln_pi = -1;");
      open("for (int w = 0; w < " + std::to_string(nw) + "; ++w)");
      if (argmax)
        line(combine_stmt(op, t, "kiln_p", smem_ptr(at, 0) + "[w]", "kiln_pi",
                          smem_ptr("int", nw * 8) + "[w]"));
      else
        line(combine_stmt(op, t, "kiln_p", smem_ptr(at, 0) + "[w]"));
      close();
      line("__syncthreads();");
      each(op.result, [&] {
        line(el(op.result) + " = " + reduce_result(op, t, tout, "kiln_p", "kiln_pi") + ";");
      });
      close();
      return;
    }
    // Stage the tile, then G lanes per output (a power of two up to a warp)
    // stride over the reduced axis and meet by shuffles.
    int64_t staged = (tx.numel() * reg_bytes(acc_dtype(t)) + 15) / 16 * 16;
    need_smem(staged + n_out * 16);
    line(at + "* kiln_x = " + smem_ptr(at, 0) + ";");
    for_owned(tx.numel(), [&] { line("kiln_x[j] = (" + at + ")" + vname(x) + "[e];"); });
    line("__syncthreads();");
    int g = 1;
    while (g < 32 && g * 2 * n_out <= T_ && g < len) g *= 2;
    std::string G = std::to_string(g);
    std::string lenS = std::to_string(len), innerS = std::to_string(inner);
    std::string res = smem_ptr(at, staged), res_i = smem_ptr("int", staged + n_out * 8);
    open("for (int kiln_o = tid / " + G + "; kiln_o < " +
         std::to_string((n_out + T_ / g - 1) / (T_ / g) * (T_ / g)) +
         "; kiln_o += " + std::to_string(T_ / g) + ")");
    line(at + " kiln_p = " + c.identity + ";");
    if (argmax) line("int kiln_pi = -1;");
    open("if (kiln_o < " + std::to_string(n_out) + ")");
    line("const int kiln_base = kiln_o / " + innerS + " * " + lenS + " * " + innerS +
         " + kiln_o % " + innerS + ";");
    open("for (int i = tid % " + G + "; i < " + lenS + "; i += " + G + ")");
    accumulate(op, t, "kiln_x[kiln_base + i * " + innerS + "]", "i");
    close();
    close();
    if (g > 1) shuffle_reduce(op, t, g);
    line("if (tid % " + G + " == 0 && kiln_o < " + std::to_string(n_out) + ") " + res +
         "[kiln_o] = kiln_p;");
    if (argmax)
      line("if (tid % " + G + " == 0 && kiln_o < " + std::to_string(n_out) + ") " + res_i +
           "[kiln_o] = kiln_pi;");
    close();
    line("__syncthreads();");
    each(op.result, [&] {
      line(el(op.result) + " = " +
           reduce_result(op, t, tout, res + "[j]", argmax ? res_i + "[j]" : "") + ";");
    });
    line("__syncthreads();");
    close();
  }

  // ---- dot ----------------------------------------------------------------------

  // Each output sums 4 adjacent bytes (or 2 i16) of a and b, which other
  // threads own: both tiles go through shared memory, and each output of
  // bytes is one dp4a of two 32-bit words. i16 pairs sum in unsigned, so
  // that (-2^15)^2 * 2 wraps as the op says instead of overflowing int.
  void emit_dot_groups(const Op& op) {
    int a = op.args[0], b = op.args[1];
    const bool words = dot_group_size(ty(a).dtype, ty(b).dtype) == 2;
    int64_t n = ty(a).numel(), staged = (n + 15) / 16 * 16 * (words ? 2 : 1);
    need_smem(2 * staged);
    std::string at = words ? "short" : ty(a).dtype == DType::u8 ? "unsigned char" : "signed char";
    std::string bt = words ? "short" : "signed char";
    open("");
    line(at + "* kiln_a = " + smem_ptr(at, 0) + ";");
    line(bt + "* kiln_b = " + smem_ptr(bt, staged) + ";");
    for_owned(n, [&] {
      line("kiln_a[j] = (" + at + ")" + vname(a) + "[e];");
      line("kiln_b[j] = (" + bt + ")" + vname(b) + "[e];");
    });
    line("__syncthreads();");
    std::string group = words ? "(int)((unsigned)(kiln_a[2 * j] * kiln_b[2 * j]) + "
                                "(unsigned)(kiln_a[2 * j + 1] * kiln_b[2 * j + 1]))"
                        : ty(a).dtype == DType::u8
                            ? "KILN_DP4A_U8(kiln_word(kiln_a, j), kiln_word(kiln_b, j))"
                            : "KILN_DP4A_S8(kiln_word(kiln_a, j), kiln_word(kiln_b, j))";
    for_owned(ty(op.result).numel(), [&] { line(vname(op.result) + "[e] = " + group + ";"); });
    line("__syncthreads();");
    close();
  }

  void emit_dot(const Op& op) {
    int a = op.args[0], b = op.args[1], acc = op.args[2];
    int64_t M = ty(a).shape[0], K = ty(a).shape[1], N = ty(b).shape[1];
    DType ta = ty(a).dtype, tb = ty(b).dtype, tr = ty(op.result).dtype;
    bool half = (ta == DType::f16 || ta == DType::bf16) && tb == ta;
    if (half && o_.sm >= kCudaMmaSm && M % 16 == 0 && N % 8 == 0 && K % 16 == 0)
      return emit_mma(op, M, K, N, ta == DType::bf16 ? "BF16" : "F16");
    bool int8 = (ta == DType::i8 || ta == DType::u8) && tb == DType::i8;
    if (int8 && o_.sm >= kCudaMmaSm && M % 16 == 0 && N % 8 == 0 && K % 32 == 0)
      return emit_mma(op, M, K, N, ta == DType::u8 ? "U8" : "S8");
    bool fl = is_float(ta);
    std::string st = fl ? "float" : "int";
    int64_t a_bytes = (M * K * 4 + 15) / 16 * 16;
    need_smem(a_bytes + K * N * 4);
    open("");
    line(st + "* kiln_a = " + smem_ptr(st, 0) + ";");
    line(st + "* kiln_b = " + smem_ptr(st, a_bytes) + ";");
    for_owned(M * K, [&] { line("kiln_a[j] = " + vname(a) + "[e];"); });
    for_owned(K * N, [&] { line("kiln_b[j] = " + vname(b) + "[e];"); });
    line("__syncthreads();");
    for_owned(M * N, [&] {
      std::string Ks = std::to_string(K), Ns = std::to_string(N);
      line("const int r = j / " + Ns + ", c = j % " + Ns + ";");
      if (fl) {
        line("float s = " + vname(acc) + "[e];");
        line("for (int p = 0; p < " + Ks + "; ++p) s = fmaf(kiln_a[r * " + Ks +
             " + p], kiln_b[p * " + Ns + " + c], s);");
        line(vname(op.result) + "[e] = " + rounded(tr, "s") + ";");
      } else {
        line("unsigned s = (unsigned)" + vname(acc) + "[e];");
        line("for (int p = 0; p < " + Ks + "; ++p) s += (unsigned)(kiln_a[r * " + Ks +
             " + p] * kiln_b[p * " + Ns + " + c]);");
        line(vname(op.result) + "[e] = (" + reg_type(tr) + ")s;");
      }
    });
    line("__syncthreads();");
    close();
  }

  // Tensor cores: each warp takes 16x8 output tiles in turn and walks K with
  // mma.sync (m16n8k16 for f16/bf16, m16n8k32 for int8); fragments are
  // gathered from shared memory in the PTX layout (see the prelude's
  // simulator): a register packs 2 halves or 4 bytes of consecutive k.
  void emit_mma(const Op& op, int64_t M, int64_t K, int64_t N, const std::string& kind) {
    uses_mma_ = true;
    int a = op.args[0], b = op.args[1], acc = op.args[2];
    bool int8 = kind == "S8" || kind == "U8";
    int eb = int8 ? 1 : 2, per_reg = 4 / eb, kstep = int8 ? 32 : 16;
    std::string et = int8 ? "unsigned char" : "unsigned short", ct = int8 ? "int" : "float";
    auto bits = [&](int id) {
      if (int8) return "(unsigned char)" + vname(id) + "[e]";
      return "kiln_" + std::string(kind == "BF16" ? "bf16" : "f16") + "_bits(" + vname(id) + "[e])";
    };
    int64_t a_bytes = (M * K * eb + 15) / 16 * 16, b_bytes = (K * N * eb + 15) / 16 * 16;
    need_smem(a_bytes + b_bytes + M * N * 4);
    std::string Ks = std::to_string(K), Ns = std::to_string(N), pr = std::to_string(per_reg);
    std::string half_k = std::to_string(kstep / 2);
    open("");
    line(et + "* kiln_a = " + smem_ptr(et, 0) + ";");
    line(et + "* kiln_b = " + smem_ptr(et, a_bytes) + ";");
    line(ct + "* kiln_c = " + smem_ptr(ct, a_bytes + b_bytes) + ";");
    for_owned(M * K, [&] { line("kiln_a[j] = " + bits(a) + ";"); });
    for_owned(K * N, [&] { line("kiln_b[j] = " + bits(b) + ";"); });
    for_owned(M * N, [&] { line("kiln_c[j] = " + vname(acc) + "[e];"); });
    line("__syncthreads();");
    line("const int g = lane >> 2, q = lane & 3;");
    open("for (int t = warp; t < " + std::to_string(M / 16 * (N / 8)) +
         "; t += " + std::to_string(o_.num_warps) + ")");
    line("const int r0 = t / " + std::to_string(N / 8) + " * 16, c0 = t % " +
         std::to_string(N / 8) + " * 8;");
    line(ct + " c[4], d[4];");
    line("for (int i = 0; i < 4; ++i) c[i] = kiln_c[(r0 + g + 8 * (i / 2)) * " + Ns +
         " + c0 + 2 * q + i % 2];");
    open("for (int k0 = 0; k0 < " + Ks + "; k0 += " + std::to_string(kstep) + ")");
    line("unsigned fa[4] = {0, 0, 0, 0}, fb[2] = {0, 0};");
    open("for (int i = 0; i < 4; ++i)");
    line("const int r = r0 + g + 8 * (i % 2), k = k0 + " + pr + " * q + " + half_k + " * (i / 2);");
    line("for (int h = 0; h < " + pr + "; ++h) fa[i] |= (unsigned)kiln_a[r * " + Ks +
         " + k + h] << (" + std::to_string(8 * eb) + " * h);");
    close();
    open("for (int i = 0; i < 2; ++i)");
    line("const int k = k0 + " + pr + " * q + " + half_k + " * i;");
    line("for (int h = 0; h < " + pr + "; ++h) fb[i] |= (unsigned)kiln_b[(k + h) * " + Ns +
         " + c0 + g] << (" + std::to_string(8 * eb) + " * h);");
    close();
    line("KILN_MMA_" + kind + "(d, fa, fb, c);");
    line("for (int i = 0; i < 4; ++i) c[i] = d[i];");
    close();
    line("for (int i = 0; i < 4; ++i) kiln_c[(r0 + g + 8 * (i / 2)) * " + Ns +
         " + c0 + 2 * q + i % 2] = c[i];");
    close();
    line("__syncthreads();");
    DType tr = ty(op.result).dtype;
    for_owned(M * N, [&] {
      line(vname(op.result) + "[e] = " + (int8 ? "kiln_c[j]" : rounded(tr, "kiln_c[j]")) + ";");
    });
    line("__syncthreads();");
    close();
  }

  // ---- control flow -------------------------------------------------------------

  void emit_for(const Op& op) {
    std::string id = std::to_string(op.result);
    std::string iv = "kiln_i" + id;
    open("");
    line("const long long kiln_lo" + id + " = " + vname(op.args[0]) + ", kiln_hi" + id + " = " +
         vname(op.args[1]) + ", kiln_st" + id + " = " + vname(op.args[2]) + ";");
    open("if (kiln_st" + id + " > 0)");
    open("for (long long " + iv + " = kiln_lo" + id + "; " + iv + " < kiln_hi" + id + "; " + iv +
         " += kiln_st" + id + ")");
    line("const " + reg_type(ty(op.result).dtype) + " " + vname(op.result) + " = (" +
         reg_type(ty(op.result).dtype) + ")" + iv + ";");
    block(op.regions[0]);
    close();
    close();
    close();
  }

  const Kernel& k_;
  CudaOptions o_;
  int T_;
  std::string body_;
  int indent_ = 0;
  int64_t smem_ = 0;
  int64_t staging_at_ = 0;           // where tile staging starts in shared memory
  std::vector<int64_t> scratch_at_;  // where each scratch array starts
  bool uses_mma_ = false;
  int tmp_ = 0;
  int64_t pending_n_ = -1;  // element count of the pending fused loop, -1: none
  std::string pending_;     // its statements
  bool capturing_ = false;
  std::vector<bool> hazard_;  // by parameter: read and written by the kernel
  std::string tables_;        // file-scope Lookup tables
  std::map<std::pair<DType, std::vector<int64_t>>, std::string> table_names_;
};

}  // namespace

int64_t cuda_max_shared_bytes(int sm) {
  if (sm >= 90) return 227 * 1024;
  if (sm >= 80) return 163 * 1024;
  return 48 * 1024;
}

void check_cuda_limits(const CudaSource& src) {
  std::string where = "CUDA kernel '" + src.entry + "' for sm_" + std::to_string(src.sm) + ": ";
  if (src.threads < 1 || src.threads > kCudaMaxThreads)
    throw Error(where + std::to_string(src.threads) + " threads per block; the limit is " +
                std::to_string(kCudaMaxThreads));
  if (src.shared_bytes > cuda_max_shared_bytes(src.sm))
    throw Error(where + "needs " + std::to_string(src.shared_bytes) +
                " bytes of shared memory per block; the limit is " +
                std::to_string(cuda_max_shared_bytes(src.sm)) +
                " (use smaller tiles or fewer elements per block)");
}

void check_cuda_registers(const CudaSource& src, int registers) {
  const int64_t warps = (src.threads + 31) / 32;
  const int64_t per_warp = (static_cast<int64_t>(registers) * 32 + 255) / 256 * 256;
  if (warps * per_warp > kCudaBlockRegisters)
    throw Error("CUDA kernel '" + src.entry + "' for sm_" + std::to_string(src.sm) + ": " +
                std::to_string(src.threads) + " threads per block of " + std::to_string(registers) +
                " registers each need " + std::to_string(warps * per_warp) +
                " registers; a block has " + std::to_string(kCudaBlockRegisters) +
                " (use fewer warps or smaller tiles)");
}

void check_cuda_launch(const CudaSource& src, const Grid& grid) {
  check_cuda_limits(src);
  for (int d = 0; d < 3; ++d)
    if (grid[d] < 0 || grid[d] > (d == 0 ? 2147483647 : 65535))
      throw Error("CUDA kernel '" + src.entry + "': grid size " + std::to_string(grid[d]) +
                  " on axis " + std::to_string(d) + " is outside the CUDA limit (" +
                  (d == 0 ? "2147483647" : "65535") + ")");
}

CudaSource emit_cuda(const Kernel& k, const CudaOptions& options) {
  CudaSource s = Emitter(k, options).run();
  check_cuda_limits(s);
  return s;
}

}  // namespace kiln
