#include "kernels/qgemv/rows16_program.h"

#include <algorithm>

#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/quant/split_sums.h"

namespace kiln {

constexpr int64_t R = kRows16;

Value Rows16Context::bytes(const Value& off, int64_t n) const {
  return load(w + (c + off + arange(n).to(DType::i64)));
}

Value Rows16Context::lanes4(const Value& off) const { return reshape(bytes(off, 4 * R), {R, 4}); }

Value Rows16Context::at(int64_t off) const {
  return full({}, static_cast<double>(off), DType::i64);
}

Value Rows16Context::f16s(const Value& off) const {
  auto h = reshape(bytes(off, 2 * R), {R, 2}).bitcast(DType::u16).bitcast(DType::f16);
  return reshape(h.to(DType::f32), {R});
}

Value Rows16Context::x4(size_t i, const Value& first) const {
  auto off = xbyte[i] + b64 * 256 + first;
  return broadcast_to(load(xq + (off + arange(4).to(DType::i64))), {R, 4}).to(DType::i32);
}

Value Rows16Context::block_sum(size_t i, const Value& j) const {
  return broadcast_to(load(xs + (xblk[i] + b64 * 8 + j)), {R});
}

namespace {
// 4 bytes of token i's split-sum group (quantize_q8's s8) from `first`, as
// [1, 4] i8 (the chunk's 8 blocks are one whole group: k % 256 == 0).
Value group_bytes4(const Rows16Context& x, size_t i, const Value& first) {
  if (!x.xs8) throw Error("Rows16Context: split sums need a format with split_sums");
  auto off = (x.xblk[i] / 8 + x.b64) * kSplitSumGroupBytes + first;
  return reshape(load(*x.xs8 + (off + arange(4).to(DType::i64))), {1, 4});
}

// The i32 at `first` of token i's group, broadcast to [16].
Value group_i32(const Rows16Context& x, size_t i, const Value& first) {
  return broadcast_to(reshape(group_bytes4(x, i, first).bitcast(DType::i32), {1}), {R});
}
}  // namespace

Value Rows16Context::split_sums4(size_t i, int64_t part) const {
  auto first = split_sum_low_at(4 * (part % 2)) + 8 * (part / 2);
  return broadcast_to(group_bytes4(*this, i, at(first)), {R, 4});
}

Value Rows16Context::split_sums16_4(size_t i, int64_t quad, bool high) const {
  auto first = split_sum16_low_at(4 * quad) + (high ? 16 : 0);
  return broadcast_to(group_bytes4(*this, i, at(first)), {R, 4});
}

Value Rows16Context::chunk_sum(size_t i) const {
  return group_i32(*this, i, at(split_sum256_at(0)));
}

Value Rows16Context::block_sum_neg128(size_t i, const Value& j) const {
  return group_i32(*this, i, j.to(DType::i64) * 4 + static_cast<int>(split_sum_neg128_at(0)));
}

void Rows16Context::prefetch_ahead(const Value& part, int64_t parts) const {
  // The last part may run a line or two into the next chunk (prefetched again later).
  const int64_t per = (chunk_bytes / 64 + parts - 1) / parts;
  prefetch(w + (ahead + part.to(DType::i64) * (per * 64) + arange(per).to(DType::i64) * 64));
}

Value dot4(const Value& codes, const Value& x) { return sum(codes.to(DType::i32) * x, 1); }

Value u32_lanes(const Value& bytes4) { return reshape(bytes4.bitcast(DType::u32), {R}); }
Value u8_lanes(const Value& words) { return reshape(words.bitcast(DType::u8), {R, 4}); }

NibblePairDots nibble_pair_dots(const Rows16Context& x, const Value& p64, int64_t codes,
                                size_t tokens, int64_t high) {
  NibblePairDots d{std::vector<Value>(tokens), std::vector<Value>(tokens), high >= 0 ? 8 : 1};
  for (int64_t g = 0; g < 8; ++g) {
    auto c = x.lanes4(p64 * (8 * R * 4) + static_cast<int>(codes + g * R * 4));
    auto lo = c & 15, hi = c >> 4;
    if (high >= 0) {
      // Q5_K's codes (rows16.h): lo in bits 0-4, hi times 8 in place, its
      // low 2 bits rotated from bits 2p of the hl byte to bits 3-4.
      auto hl = u32_lanes(x.lanes4(x.at(high + g * R * 4)));
      auto left = broadcast_to(((3 - 2 * p64) & 31).to(DType::u32), {R});
      auto low2 = ((hl << left) | (hl >> ((32 - left) & 31))) & 0x18181818;
      lo = u8_lanes(u32_lanes(c) & 0x1F1F1F1F);
      hi = u8_lanes((u32_lanes(c) & 0xE0E0E0E0) | low2);
    }
    for (size_t i = 0; i < tokens; ++i) {
      auto dlo = dot4(lo, x.x4(i, p64 * 64 + static_cast<int>(4 * g)));
      auto dhi = dot4(hi, x.x4(i, p64 * 64 + static_cast<int>(32 + 4 * g)));
      d.lo[i] = g == 0 ? dlo : d.lo[i] + dlo;
      d.hi[i] = g == 0 ? dhi : d.hi[i] + dhi;
    }
  }
  return d;
}

void build_rows16_program(KernelBuilder& k, const Spec& s, int64_t block_t, const Rows16Format& f) {
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  Rows16Context x{w, xq, xd, xs, {}, {}, {}, {}, {}, {}, f.chunk_bytes};
  if (f.split_sums) x.xs8 = k.buffer("xs8", DType::i8);
  auto y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  auto nb = K / 256;
  ExpertTiles tiles(k, s, block_t, T, nb * static_cast<int>(f.chunk_bytes));
  tiles.run([&] {
    x.w = tiles.weights(w);
    auto group = tiles.row_block();
    std::vector<Var> out, acc;
    for (const Value& t : tiles.x_rows(block_t)) {
      x.xbyte.push_back(t.to(DType::i64) * K.to(DType::i64));
      x.xblk.push_back(t.to(DType::i64) * (K / 32).to(DType::i64));
      out.push_back(k.var(zeros(DType::f32, {R})));
      if (f.superblock_scaled) acc.push_back(k.var(zeros(DType::f32, {R})));
    }
    auto chunk0 = group.to(DType::i64) * nb.to(DType::i64);
    k.for_(0, nb, 1, [&](Value b) {
      x.b64 = b.to(DType::i64);
      x.c = (chunk0 + x.b64) * f.chunk_bytes;
      // The chunk code prefetches the chunk 4 KiB ahead, every line, part
      // by part (Rows16Context::prefetch_ahead): a 16-row group's chunks
      // are contiguous, but the hardware prefetchers stop at each 4 KiB
      // page, and decode (one token) has too little work per chunk to hide
      // a DRAM miss (Q4_1 decode 20-23 -> 30-33 GB/s with the next chunk).
      // Ahead by bytes, not by one chunk: a Q2_K/Q3_K chunk (1.3/1.8 KB)
      // takes less time than the miss. kiln bench, 4096x14336, 2 threads,
      // 2 rounds, fraction of the probe, the next chunk in one burst -> 4
      // KiB ahead -> in parts: Q2_K 0.65 -> 0.78 -> 0.84-0.88, Q3_K 0.66 ->
      // 0.74-0.76 -> 0.80-0.83, Q4_K 0.86 -> 0.92-0.96 -> 0.99-1.00, Q5_K
      // 0.84-0.86 (4 KiB) -> 0.95-0.96, Q6_K 0.79-0.80 -> 0.79-0.80 ->
      // 0.90-0.91, IQ4_XS 0.72-0.80 -> 0.84-0.86 -> 0.89-0.95, Q8_0
      // 0.92-0.96 (4 KiB) -> 1.03; 8 KiB ahead equal to 4 within noise.
      const int64_t ahead = std::max<int64_t>(1, (4096 + f.chunk_bytes - 1) / f.chunk_bytes);
      x.ahead = x.c + ahead * f.chunk_bytes;
      if (!f.superblock_scaled) {
        f.chunk(k, x, out);
        return;
      }
      for (auto& a : acc) a = zeros(DType::f32, {R});
      f.chunk(k, x, acc);
      // Q8_K repeats the super-block's d in each of its 8 slots.
      for (size_t i = 0; i < acc.size(); ++i)
        out[i] = fma(Value(acc[i]), load(xd + (x.xblk[i] + x.b64 * 8)), Value(out[i]));
    });
    auto rows = group * static_cast<int>(R) + arange(R);
    for (size_t i = 0; i < out.size(); ++i) {
      auto pos = tiles.first() + static_cast<int>(i);
      k.if_(pos < T, [&] {
        store(y + (pos.to(DType::i64) * M.to(DType::i64) + rows.to(DType::i64)), Value(out[i]));
      });
    }
  });
}

LaunchShape rows16_launch(const std::string& kernel, int64_t block_t, int64_t m, int64_t k,
                          int64_t t, int64_t w_bytes, bool split_sums) {
  if (m % R || k % 256)
    throw Error("kernel '" + kernel + "': [m, k] = [" + std::to_string(m) + ", " +
                std::to_string(k) + "] needs m a multiple of 16 and k of 256");
  if (t < 1)
    throw Error("kernel '" + kernel + "': t = " + std::to_string(t) + " tokens (need >= 1)");
  LaunchShape l{
      {cdiv(t, block_t), m / R, 1},
      {{"w", w_bytes}, {"xq", t * k}, {"xd", t * k / 32}, {"xs", t * k / 32}, {"y", t * m}}};
  if (split_sums) l.buffer_elems["xs8"] = split_sum_bytes(t * k / 32);
  return l;
}

}  // namespace kiln
