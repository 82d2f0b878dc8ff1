#include "targets/cuda/cuda_simulator.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "codegen/cuda/sim_abi.h"
#include "ir/error.h"
#include "targets/cuda/host_command.h"
#include "targets/cuda/kernel_params.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

constexpr size_t kStackBytes = size_t{1} << 20;  // per simulated thread
constexpr size_t kGuardBytes = 4096;

enum class Wait : uint8_t { None, Block, Warp, Done };

struct SimThread {
  ucontext_t ctx;
  KilnSimDim3 idx{};
  int warp = 0;
  Wait wait = Wait::None;
  uint64_t gen = 0;  // the barrier generation it waits to see pass
};

struct Barrier {
  uint64_t gen = 0;
  int arrived = 0;
  int live = 0;
};

struct BufferRange {
  const char* begin;
  const char* end;
  std::string name;
};

// The state of one launch: what the hooks read through `tls_launch`.
struct Launch {
  std::vector<SimThread> threads;
  SimThread* current = nullptr;
  ucontext_t scheduler;
  KilnSimDim3 block{}, block_dim{}, grid_dim{};
  std::vector<unsigned char> shared;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<uint64_t> warp_slots;  // warps x 32 x KILN_SIM_SLOT_WORDS
  std::vector<BufferRange> buffers;
  std::string violation;  // the first bad access
  alignas(16) unsigned char scratch[64];
  void (*thread_fn)(void* const*) = nullptr;
  void* const* args = nullptr;
};

thread_local Launch* tls_launch = nullptr;

std::string dim_str(const KilnSimDim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

void yield_to_scheduler() {
  Launch& l = *tls_launch;
  swapcontext(&l.current->ctx, &l.scheduler);
}

void arrive(Barrier& b, SimThread& t, Wait kind) {
  t.wait = kind;
  t.gen = b.gen;
  if (++b.arrived == b.live) {
    ++b.gen;
    b.arrived = 0;
  }
  yield_to_scheduler();
}

const KilnSimDim3* hook_thread_idx() { return &tls_launch->current->idx; }
const KilnSimDim3* hook_block_idx() { return &tls_launch->block; }
const KilnSimDim3* hook_block_dim() { return &tls_launch->block_dim; }
const KilnSimDim3* hook_grid_dim() { return &tls_launch->grid_dim; }
unsigned char* hook_shared() { return tls_launch->shared.data(); }
void hook_sync_block() { arrive(tls_launch->block_barrier, *tls_launch->current, Wait::Block); }
void hook_sync_warp() {
  Launch& l = *tls_launch;
  arrive(l.warp_barriers[l.current->warp], *l.current, Wait::Warp);
}
uint64_t* hook_warp_slots() {
  Launch& l = *tls_launch;
  return &l.warp_slots[static_cast<size_t>(l.current->warp) * 32 * KILN_SIM_SLOT_WORDS];
}

void* hook_check(const void* p, size_t bytes, int is_write) {
  Launch& l = *tls_launch;
  const char* c = static_cast<const char*>(p);
  for (const BufferRange& b : l.buffers)
    if (c >= b.begin && c + bytes <= b.end) return const_cast<void*>(p);
  if (l.violation.empty()) {
    std::string where = "no launched buffer";
    for (const BufferRange& b : l.buffers) {
      if (b.begin == b.end && c == b.begin) {
        where = "buffer '" + b.name + "', which is empty";
        break;
      }
      ptrdiff_t off = c - b.begin;
      if (off >= -(1 << 20) && c < b.end + (1 << 20)) {
        where = "buffer '" + b.name + "' at byte offset " + std::to_string(off) + " (size " +
                std::to_string(b.end - b.begin) + " bytes)";
        break;
      }
    }
    l.violation = std::string(is_write ? "write" : "read") + " of " + std::to_string(bytes) +
                  " bytes outside every buffer: " + where + ", by thread " +
                  dim_str(l.current->idx) + " of block " + dim_str(l.block);
  }
  return l.scratch;
}

uint16_t hook_f32_to_f16(float x) { return f32_to_f16_bits(x); }
float hook_f16_to_f32(uint16_t h) { return f16_bits_to_f32(h); }
uint16_t hook_f32_to_bf16(float x) { return f32_to_bf16_bits(x); }
float hook_bf16_to_f32(uint16_t h) { return bf16_bits_to_f32(h); }
uint8_t hook_f32_to_f8e4m3(float x) { return f32_to_f8e4m3_bits(x); }
float hook_f8e4m3_to_f32(uint8_t b) { return f8e4m3_bits_to_f32(b); }
uint8_t hook_f32_to_f8e5m2(float x) { return f32_to_f8e5m2_bits(x); }
float hook_f8e5m2_to_f32(uint8_t b) { return f8e5m2_bits_to_f32(b); }

const KilnSimHooks kHooks = {
    KILN_SIM_ABI_VERSION, hook_thread_idx,    hook_block_idx,     hook_block_dim,
    hook_grid_dim,        hook_shared,        hook_sync_block,    hook_sync_warp,
    hook_warp_slots,      hook_check,         hook_f32_to_f16,    hook_f16_to_f32,
    hook_f32_to_bf16,     hook_bf16_to_f32,   hook_f32_to_f8e4m3, hook_f8e4m3_to_f32,
    hook_f32_to_f8e5m2,   hook_f8e5m2_to_f32,
};

// A fiber's whole life: the kernel body, then leaving the barriers' counts
// (an exited thread no longer holds back __syncthreads, as on the GPU).
void fiber_main() {
  Launch& l = *tls_launch;
  l.thread_fn(l.args);
  SimThread& t = *l.current;
  t.wait = Wait::Done;
  for (Barrier* b : {&l.block_barrier, &l.warp_barriers[t.warp]}) {
    --b->live;
    if (b->arrived > 0 && b->arrived == b->live) {
      ++b->gen;
      b->arrived = 0;
    }
  }
}

bool waiting(const Launch& l, const SimThread& t) {
  switch (t.wait) {
    case Wait::Done: return true;
    case Wait::Block: return t.gen == l.block_barrier.gen;
    case Wait::Warp: return t.gen == l.warp_barriers[t.warp].gen;
    default: return false;
  }
}

void run_block(Launch& l, char* stacks) {
  int n = static_cast<int>(l.threads.size());
  int warps = (n + 31) / 32;
  l.block_barrier = Barrier{0, 0, n};
  l.warp_barriers.assign(static_cast<size_t>(warps), Barrier{});
  for (int w = 0; w < warps; ++w) l.warp_barriers[w].live = std::min(32, n - 32 * w);
  std::fill(l.shared.begin(), l.shared.end(), 0xA5);  // stale data is visible
  for (int i = 0; i < n; ++i) {
    SimThread& t = l.threads[i];
    t.idx = KilnSimDim3{static_cast<unsigned>(i), 0, 0};
    t.warp = i / 32;
    t.wait = Wait::None;
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp =
        stacks + static_cast<size_t>(i) * (kStackBytes + kGuardBytes) + kGuardBytes;
    t.ctx.uc_stack.ss_size = kStackBytes;
    t.ctx.uc_link = &l.scheduler;
    makecontext(&t.ctx, fiber_main, 0);
  }
  int done = 0;
  while (done < n) {
    bool progressed = false;
    done = 0;
    for (SimThread& t : l.threads) {
      if (t.wait == Wait::Done) {
        ++done;
        continue;
      }
      if (waiting(l, t)) continue;
      t.wait = Wait::None;
      l.current = &t;
      swapcontext(&l.scheduler, &t.ctx);
      progressed = true;
    }
    if (!progressed && done < n) {
      int at_block = 0, at_warp = 0;
      for (const SimThread& t : l.threads) {
        at_block += t.wait == Wait::Block;
        at_warp += t.wait == Wait::Warp;
      }
      throw Error("CUDA simulator: deadlock in block " + dim_str(l.block) + ": " +
                  std::to_string(at_block) + " threads wait at __syncthreads, " +
                  std::to_string(at_warp) + " at a warp-wide exchange, " + std::to_string(done) +
                  " have exited");
    }
  }
}

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Written aside and renamed into place: another process compiling the same
// source in the same folder never reads a half-written file.
void write_file(const fs::path& p, std::string_view text) {
  fs::path tmp = p.string() + "." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!f) throw Error("CUDA simulator: cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) throw Error("CUDA simulator: cannot write " + p.string() + ": " + ec.message());
}

}  // namespace

std::string SimulatedKernel::cache_dir() {
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return (tmp / ("kiln-cuda-sim-" + std::to_string(getuid()))).string();
}

SimulatedKernel::CacheStats SimulatedKernel::cache_stats() {
  CacheStats s;
  std::error_code ec;
  for (fs::directory_iterator d(cache_dir(), ec), end; !ec && d != end; d.increment(ec)) {
    if (!d->is_directory(ec)) continue;
    ++s.builds;
    std::error_code fe;  // a file that vanishes mid-walk ends this build's count only
    for (fs::recursive_directory_iterator f(d->path(), fe), fend; !fe && f != fend; f.increment(fe))
      if (f->is_regular_file(fe)) s.bytes += static_cast<int64_t>(f->file_size(fe));
  }
  return s;
}

int64_t SimulatedKernel::clear_cache() {
  int64_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator d(cache_dir(), ec), end; !ec && d != end; d.increment(ec)) {
    std::error_code rm;
    if (d->is_directory(rm) && fs::remove_all(d->path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

SimulatedKernel::~SimulatedKernel() {
  if (handle_) dlclose(handle_);
}

std::shared_ptr<SimulatedKernel> SimulatedKernel::compile(const CudaSource& src) {
  const char* cxx_env = std::getenv("KILN_HOST_CXX");
  std::string cxx = cxx_env && *cxx_env ? cxx_env : "c++";
  std::string flags = "-std=c++17 -O1 -shared -fPIC -DKILN_SIM -w";
  uint64_t h = fnv1a(src.code, fnv1a(cuda_prelude(), fnv1a(cuda_sim_abi(), fnv1a(cxx + flags))));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  fs::path dir = fs::path(cache_dir()) / hex;
  fs::path so = dir / (src.entry + ".so");
  std::error_code ec;
  if (!fs::exists(so, ec)) {
    fs::create_directories(dir, ec);
    if (ec) throw Error("CUDA simulator: cannot create " + dir.string() + ": " + ec.message());
    write_file(dir / "kiln_cuda.cuh", cuda_prelude());
    write_file(dir / "kiln_sim_abi.h", cuda_sim_abi());
    fs::path cu = dir / (src.entry + ".cu");
    write_file(cu, src.code);
    fs::path tmp = dir / (src.entry + ".so." + std::to_string(getpid()));
    int status = 0;
    std::string log = run_host_command(
        cxx + " " + flags + " -I" + dir.string() + " -x c++ " + cu.string() + " -o " + tmp.string(),
        &status);
    if (status != 0)
      throw Error("CUDA simulator: the host compiler rejected the CUDA C of kernel '" + src.entry +
                  "' (" + cu.string() + "):\n" + log);
    fs::rename(tmp, so, ec);
    if (ec) throw Error("CUDA simulator: cannot move " + tmp.string() + ": " + ec.message());
  }
  std::shared_ptr<SimulatedKernel> k(new SimulatedKernel());
  k->src_ = src;
  k->handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!k->handle_)
    throw Error(std::string("CUDA simulator: cannot load ") + so.string() + ": " + dlerror());
  auto bind = reinterpret_cast<void (*)(const KilnSimHooks*)>(dlsym(k->handle_, "kiln_sim_bind"));
  k->thread_fn_ = reinterpret_cast<void (*)(void* const*)>(dlsym(k->handle_, "kiln_sim_thread"));
  if (!bind || !k->thread_fn_)
    throw Error("CUDA simulator: " + so.string() + " lacks kiln_sim_bind/kiln_sim_thread");
  bind(&kHooks);
  return k;
}

void SimulatedKernel::launch(const Kernel& k, const std::vector<Arg>& args,
                             const Grid& grid) const {
  check_cuda_launch(src_, grid);
  int n = src_.threads;
  Launch l;
  KernelParams params = pack_kernel_params(k, args, [&](size_t i) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(args[i].data));
  });
  for (size_t i = 0; i < args.size(); ++i) {
    if (k.params[i].kind != ParamKind::Buffer) continue;
    const char* b = static_cast<const char*>(args[i].data);
    l.buffers.push_back({b, b + args[i].count * dtype_bytes(k.params[i].dtype), k.params[i].name});
  }
  l.threads.resize(static_cast<size_t>(n));
  l.shared.assign(static_cast<size_t>(src_.shared_bytes), 0);
  for (const CudaSource::ScratchRange& r : src_.scratch) {
    const char* b = reinterpret_cast<const char*>(l.shared.data()) + r.offset;
    l.buffers.push_back({b, b + r.bytes, "scratch " + r.name});
  }
  l.warp_slots.assign(static_cast<size_t>((n + 31) / 32) * 32 * KILN_SIM_SLOT_WORDS, 0);
  l.block_dim = KilnSimDim3{static_cast<unsigned>(n), 1, 1};
  l.grid_dim = KilnSimDim3{static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                           static_cast<unsigned>(grid[2])};
  l.thread_fn = thread_fn_;
  l.args = params.ptrs.data();

  size_t total = static_cast<size_t>(n) * (kStackBytes + kGuardBytes);
  void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) throw Error("CUDA simulator: cannot map fiber stacks");
  char* stacks = static_cast<char*>(mem);
  for (int i = 0; i < n; ++i)  // a stack overflow faults instead of corrupting a neighbour
    mprotect(stacks + static_cast<size_t>(i) * (kStackBytes + kGuardBytes), kGuardBytes, PROT_NONE);

  Launch* saved = tls_launch;
  tls_launch = &l;
  try {
    for (int64_t z = 0; z < grid[2]; ++z)
      for (int64_t y = 0; y < grid[1]; ++y)
        for (int64_t x = 0; x < grid[0] && l.violation.empty(); ++x) {
          l.block = KilnSimDim3{static_cast<unsigned>(x), static_cast<unsigned>(y),
                                static_cast<unsigned>(z)};
          run_block(l, stacks);
        }
  } catch (...) {
    tls_launch = saved;
    munmap(mem, total);
    throw;
  }
  tls_launch = saved;
  munmap(mem, total);
  if (!l.violation.empty()) throw Error("CUDA simulator: kernel '" + k.name + "': " + l.violation);
}

}  // namespace kiln
