// Rows of a table picked by index, as f32: out[i, :] = table[ids[i], :] *
// scale. A forward looks up token embeddings with it (Gemma scales them by
// sqrt(n_embd), as an f32 product after the lookup like llama.cpp) and
// gathers the rows routed to an MoE expert (scale 1, exact). The table is
// f32/f16/bf16 (W, FMT 0) or ggml blocks (W = u8, FMT = the ggml type id:
// 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 10 Q2_K, 11 Q3_K, 12 Q4_K,
// 13 Q5_K, 14 Q6_K, 16 IQ2_XXS, 17 IQ2_XS, 18 IQ3_XXS, 20 IQ4_NL, 21 IQ3_S,
// 22 IQ2_S, 23 IQ4_XS, 39 MXFP4; layouts in
// kernels/quant/ggml_blocks.h), dequantised
// element by element exactly as ggml's dequantize_row does (same products
// in the same order), so a quantized embedding matches llama.cpp's lookup
// bit for bit. Not fast, and need not be: it reads one row per token.
#include <functional>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/quant/e8m0.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/iq_grids.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

// Element e (i64, within its block) of the blocks at byte offsets blk (i64)
// of a ggml block format; `byte(off)` loads one byte per element as i32.
class BlockDecoder {
 public:
  BlockDecoder(std::function<Value(const Value&)> byte) : byte_(std::move(byte)) {}

  Value decode(TensorType fmt, const Value& blk, const Value& e) {
    using T = TensorType;
    switch (fmt) {
      case T::q4_0: {  // d, 16 bytes of nibbles (low: elements 0-15)
        Value q = byte(blk + fields::Q4_0::qs + e % 16);
        Value nib = where(e < 16, q & 15, q >> 4);
        return (nib - 8).to(DType::f32) * f16(blk);
      }
      case T::q4_1: {  // d, m, 16 bytes of nibbles; w = q d + m
        using F = fields::Q4_1;
        Value q = byte(blk + F::qs + e % 16);
        Value nib = where(e < 16, q & 15, q >> 4);
        return nib.to(DType::f32) * f16(blk) + f16(blk + F::m);
      }
      case T::q5_0:  // d, 4 bytes of 5th bits, 16 of nibbles; w = (q - 16) d
        return (code_5bit(blk + fields::Q5_0::qh, blk + fields::Q5_0::qs, e) - 16).to(DType::f32) *
               f16(blk);
      case T::q5_1: {  // d, m, 4 bytes of 5th bits, 16 of nibbles; w = q d + m
        using F = fields::Q5_1;
        return code_5bit(blk + F::qh, blk + F::qs, e).to(DType::f32) * f16(blk) + f16(blk + F::m);
      }
      case T::q8_0:  // d, 32 signed bytes
        return signed_byte(blk + fields::Q8_0::qs + e).to(DType::f32) * f16(blk);
      case T::q2_K: {  // 16 scale|min bytes, 64 of 2-bit codes, d, dmin
        using F = fields::Q2_K;
        static_assert(F::scales == 0);
        Value sc = byte(blk + e / 16);
        Value q = code_2bit(blk + F::qs, e);
        return f16(blk + F::d) * (sc & 15).to(DType::f32) * q.to(DType::f32) -
               f16(blk + F::dmin) * (sc >> 4).to(DType::f32);
      }
      case T::q3_K: {  // 32 bytes of 3rd bits, 64 of 2-bit codes, 12 of 6-bit scales, d
        using F = fields::Q3_K;
        static_assert(F::hmask == 0);
        Value g = e / 16;
        Value lo = byte(blk + F::scales + g % 8);
        Value hi = (byte(blk + (F::scales + 8) + g % 4) >> ((g / 4) * 2).to(DType::i32)) & 3;
        Value sc = (where(g < 8, lo & 15, lo >> 4) | (hi << 4)) - 32;
        Value q = code_2bit(blk + F::qs, e);
        Value hbit = (byte(blk + e % 32) >> (e / 32).to(DType::i32)) & 1;
        return f16(blk + F::d) * sc.to(DType::f32) * (q - ((hbit ^ 1) << 2)).to(DType::f32);
      }
      case T::q4_K:    // d, dmin, 12 bytes of 6-bit scales and mins, 128 of nibbles
      case T::q5_K: {  // Q4_K's header, 32 bytes of 5th bits, 128 of nibbles
        using F = fields::Q5_K;
        static_assert(F::scales == fields::Q4_K::scales && F::dmin == fields::Q4_K::dmin);
        const bool q5 = fmt == T::q5_K;
        Value j = e / 32;
        Value lo = j < 4;
        Value s_j = byte(blk + F::scales + j), s_j4 = byte(blk + F::scales + j + 4);
        Value s_jm4 = byte(blk + F::scales + (j + 8) % 12);  // s[j - 4] for j >= 4
        Value sc = where(lo, s_j & 63, (s_j4 & 15) | ((s_jm4 >> 6) << 4));
        Value m = where(lo, s_j4 & 63, (s_j4 >> 4) | ((s_j >> 6) << 4));
        Value q = byte(blk + (q5 ? F::qs : fields::Q4_K::qs) + (e / 64) * 32 + e % 32);
        Value code = where((j & 1) == 0, q & 15, q >> 4);
        if (q5) code = code | (((byte(blk + F::qh + e % 32) >> j.to(DType::i32)) & 1) << 4);
        return f16(blk) * sc.to(DType::f32) * code.to(DType::f32) -
               f16(blk + F::dmin) * m.to(DType::f32);
      }
      case T::q6_K: {  // 128 bytes of low nibbles, 64 of high pairs, 16 scales, d
        using F = fields::Q6_K;
        static_assert(F::ql == 0);
        Value h = e / 128, r = e % 128;
        Value quarter = r / 32, l = r % 32;
        Value ql = byte(blk + h * 64 + l + (quarter & 1) * 32);
        Value low = where(quarter >= 2, ql >> 4, ql & 15);
        Value high = (byte(blk + F::qh + h * 32 + l) >> (quarter * 2).to(DType::i32)) & 3;
        Value q = (low | (high << 4)) - 32;
        Value sc = signed_byte(blk + F::scales + h * 8 + l / 16 + quarter * 2);
        return f16(blk + F::d) * sc.to(DType::f32) * q.to(DType::f32);
      }
      case T::iq4_nl:   // d, 16 bytes of nibbles into the codebook
      case T::mxfp4: {  // e8m0 e, 16 bytes of nibbles into doubled e2m1 values
        const bool nl = fmt == T::iq4_nl;
        Value v =
            codebook(nl ? ggml::kIq4nlValues : ggml::kMxfp4Values,
                     nibble(byte(blk + (nl ? fields::IQ4_NL::qs : fields::MXFP4::qs) + e % 16), e))
                .to(DType::f32);
        return nl ? f16(blk) * v : v * e8m0_half_value(byte(blk));
      }
      case T::iq4_xs: {  // d, u16 scales_h, 4 bytes scales_l, 128 of nibbles
        using F = fields::IQ4_XS;
        Value s = e / 32;
        Value low = (byte(blk + F::scales_l + s / 2) >> ((s % 2) * 4).to(DType::i32)) & 15;
        Value high = ((byte(blk + F::scales_h) | (byte(blk + (F::scales_h + 1)) << 8)) >>
                      (s * 2).to(DType::i32)) &
                     3;
        Value v = codebook(ggml::kIq4nlValues, nibble(byte(blk + F::qs + s * 16 + e % 16), e % 32));
        return f16(blk) * ((low | (high << 4)) - 32).to(DType::f32) * v.to(DType::f32);
      }
      case T::iq2_xxs:
      case T::iq2_xs:
      case T::iq3_xxs:
      case T::iq3_s:
      case T::iq2_s: return lattice(fmt, blk, e);
      default:
        throw Error("get_rows: FMT " + tensor_type_name(fmt) + " is not a ggml block format");
    }
  }

 private:
  // A lattice format (ggml_blocks.h): element e's grid point (point k of
  // its sub-block s, 8-weight group l), sign byte and scale db, and
  // w = db mag (-1 where the sign bit is set), ggml's products in its order.
  Value lattice(TensorType fmt, const Value& blk, const Value& e) {
    using T = TensorType;
    const bool iq3 = fmt == T::iq3_xxs || fmt == T::iq3_s;
    Value s = e / 32, w = e % 32, l = w / 8, k = w / (iq3 ? 4 : 8);
    Value d = f16(blk), point, sign, db;
    auto ksigns = [](const Value& index7) {
      std::vector<int64_t> table;
      for (int i = 0; i < 128; ++i) table.push_back(ggml::lattice_signs(i));
      return lookup(table, DType::i32, index7);
    };
    // IQ2_XXS/IQ3_XXS: the u32 at `off` holds group l's sign7 and the scale.
    auto sign7_word = [&](const Value& off, double step) {
      Value a = byte(off).to(DType::i64) | (byte(off + 1).to(DType::i64) << 8) |
                (byte(off + 2).to(DType::i64) << 16) | (byte(off + 3).to(DType::i64) << 24);
      sign = ksigns(((a >> (l * 7)) & 127).to(DType::i32));
      db = d * ((a >> 28).to(DType::f32) + 0.5) * step;
    };
    // IQ2_XS/IQ2_S: the scale nibble of e's 16 weights.
    auto nibble_scale = [&](const Value& off) {
      db = d * (((byte(off) >> ((w / 16) * 4).to(DType::i32)) & 15).to(DType::f32) + 0.5) * 0.25;
    };
    switch (fmt) {
      case T::iq2_xxs: {  // 4 point bytes, then the u32 of signs and scale, per sub-block
        using F = fields::IQ2_XXS;
        point = byte(blk + F::qs + s * 8 + l);
        sign7_word(blk + (F::qs + 4) + s * 8, 0.25);
        break;
      }
      case T::iq2_xs: {
        using F = fields::IQ2_XS;
        Value q =
            byte(blk + F::qs + s * 8 + l * 2) | (byte(blk + (F::qs + 1) + s * 8 + l * 2) << 8);
        point = q & 511;
        sign = ksigns(q >> 9);
        nibble_scale(blk + F::scales + s);
        break;
      }
      case T::iq2_s: {
        using F = fields::IQ2_S;
        point = byte(blk + F::qs + s * 4 + l) |
                (((byte(blk + F::qh + s) >> (l * 2).to(DType::i32)) & 3) << 8);
        sign = byte(blk + F::signs + s * 4 + l);
        nibble_scale(blk + F::scales + s);
        break;
      }
      case T::iq3_xxs:
        point = byte(blk + fields::IQ3_XXS::qs + s * 8 + k);
        sign7_word(blk + fields::IQ3_XXS::aux + s * 4, 0.5);
        break;
      default: {  // IQ3_S
        using F = fields::IQ3_S;
        point = byte(blk + F::qs + s * 8 + k) |
                (((byte(blk + F::qh + s) >> k.to(DType::i32)) & 1) << 8);
        sign = byte(blk + F::signs + s * 4 + l);
        db = d * (((byte(blk + F::scales + s / 2) >> ((s % 2) * 4).to(DType::i32)) & 15) * 2 + 1)
                     .to(DType::f32);
      }
    }
    Value grid = lookup(ggml::lattice_grid(fmt), DType::i64, point);
    Value mag = ((grid >> ((w % (iq3 ? 4 : 8)) * 8)) & 255).to(DType::f32);
    Value v = db * mag;
    return where(((sign >> (w % 8).to(DType::i32)) & 1) != 0, -v, v);
  }
  // Element e's 5-bit code: its nibble (low for e < 16, high for the rest)
  // and bit e of the little-endian u32 at qh.
  Value code_5bit(const Value& qh, const Value& qs, const Value& e) {
    Value q = byte(qs + e % 16);
    Value nib = where(e < 16, q & 15, q >> 4);
    Value bit = (byte(qh + e / 8) >> (e % 8).to(DType::i32)) & 1;
    return nib | (bit << 4);
  }
  // Element e's 2-bit code in Q2_K/Q3_K's qs at `qs`: bits 2j..2j+1 of
  // qs[32 h + l] for e = 128 h + 32 j + l.
  Value code_2bit(const Value& qs, const Value& e) {
    return (byte(qs + (e / 128) * 32 + e % 32) >> (((e % 128) / 32) * 2).to(DType::i32)) & 3;
  }
  // The low (element e < 16 of its 32) or high nibble of byte q.
  static Value nibble(const Value& q, const Value& e) { return where(e % 32 < 16, q & 15, q >> 4); }
  // Entry q of a signed 16-entry codebook, as i32.
  static Value codebook(const int8_t* values, const Value& q) {
    return lookup(std::vector<int64_t>(values, values + 16), DType::i32, q);
  }
  Value byte(const Value& off) { return byte_(off); }
  Value signed_byte(const Value& off) { return (byte(off) ^ 128) - 128; }
  // The little-endian f16 at `off`, as f32.
  Value f16(const Value& off) {
    Value bits = byte(off) | (byte(off + 1) << 8);
    return bits.to(DType::u16).bitcast(DType::f16).to(DType::f32);
  }
  std::function<Value(const Value&)> byte_;
};

Kernel build_get_rows(const Spec& s) {
  KernelBuilder k("get_rows", s);
  DType W = s.dtype("W");
  const int64_t FMT = s.constexpr_("FMT"), B = s.constexpr_("BLOCK");
  if ((W == DType::u8) != (FMT != 0))
    throw Error(
        "get_rows: W=u8 needs a ggml block FMT (a ggml type id, e.g. 8 for Q8_0), float tables "
        "FMT=0");
  auto table = k.buffer("table", W);
  auto ids = k.buffer("ids", DType::i32);
  auto out = k.buffer("out", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto rows = k.scalar("rows", DType::i32);  // ids to look up (a plan patches it per replay)
  auto scale = k.scalar("scale", DType::f32);
  auto i = k.program_id(0);
  auto c = (k.program_id(1) * static_cast<int>(B) + arange(B)).to(DType::i64);
  auto n64 = n.to(DType::i64);
  auto mask = (c < n64) & (i < rows);
  auto row = load(ids + i).to(DType::i64);
  Value v;
  if (W != DType::u8) {
    v = load(table + (row * n64 + c), mask, 0.0).to(DType::f32);
  } else {
    const TensorTypeInfo& f = block_type_info(FMT);
    const int BE = f.block_elems, BB = f.block_bytes;
    auto blk = row * (n64 / BE * BB) + (c / BE) * BB;
    BlockDecoder dec([&](const Value& off) { return load(table + off, mask, 0.0).to(DType::i32); });
    v = dec.decode(f.type, blk, c % BE);
  }
  store(out + (i.to(DType::i64) * n64 + c), v * scale, mask);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "get_rows",
    .family = "rows",
    .summary = "out[i] = table[ids[i]] * scale as f32 (float tables or ggml blocks)",
    .dtype_roles = {{"W", {DType::f32, DType::f16, DType::bf16, DType::u8}}},
    .constexpr_defaults = {{"FMT", 0}, {"BLOCK", 256}},
    .build = build_get_rows,
    // sizes: "table_rows", the table's height.
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t rows = a.i("rows"), n = a.i("n"), fmt = s.constexpr_("FMT");
          int64_t row_elems = n;
          if (fmt) {
            const TensorTypeInfo& f = block_type_info(fmt);
            if (n % f.block_elems)
              throw Error("get_rows: row length " + std::to_string(n) + " is not a multiple of " +
                          std::to_string(f.block_elems) + " (" + std::string(f.name) + ")");
            row_elems = n / f.block_elems * f.block_bytes;
          }
          return LaunchShape{
              {rows, cdiv(n, s.constexpr_("BLOCK")), 1},
              {{"table", a.i("table_rows") * row_elems}, {"ids", rows}, {"out", rows * n}}};
        },
    // A byte table without a format: Q8_0 blocks. Its elements decode
    // through byte gathers, which LLVM expands lane by lane, super-linearly
    // in compile time: a Q4_K row block of 64 compiles in 0.12 s, of 256 in
    // 4.9 s (AVX-512; most of a cold `kiln run`), and a lookup is a sliver
    // of a forward either way.
    .heuristic = [](const Spec& s) -> std::map<std::string, int64_t> {
      if (s.dtype("W") == DType::u8) return {{"FMT", 8}, {"BLOCK", 64}};
      return {};
    },
}));

}  // namespace
}  // namespace kiln
