#include "kernels/aura/aura_codes.h"

#include <bit>
#include <cstring>
#include <vector>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/aura/aura_format.h"

namespace kiln {

namespace {

// f32 values as a Lookup table of their bit patterns.
std::vector<int64_t> f32_bits(const std::vector<float>& v) {
  std::vector<int64_t> t;
  for (float f : v) t.push_back(static_cast<int64_t>(std::bit_cast<int32_t>(f)));
  return t;
}

// A shape with its last axis replaced.
Shape with_last(Shape s, int64_t n) {
  s.back() = n;
  return s;
}

// Within each group of 32 coordinates (b words), coordinate c's bits start
// at bit r = (c * b) % 32 of word w = (c * b) / 32 and straddle into word
// w + 1 when r + b > 32 (b = 3 only). As u32 [32] tiles.
struct Lanes {
  Value w, r, straddle;
};
Lanes group_lanes(int bits) {
  auto c = arange(32) * bits;
  return {(c / 32).to(DType::u32), (c % 32).to(DType::u32), (c % 32) + bits > 32};
}

void check_d(int64_t D, const char* what) {
  if (D % 32)
    throw Error(std::string("AURA ") + what + ": D = " + std::to_string(D) +
                " is not a multiple of 32");
}

}  // namespace

Value aura_quantize(const Value& y, int bits, int64_t D) {
  const std::vector<int64_t> t = f32_bits(aura_thresholds(bits, D));
  const Shape shape = y.shape();
  Value code = zeros(DType::i32, shape);
  for (int step = (1 << bits) / 2; step >= 1; step /= 2) {
    auto probe = code + step;
    auto above = y > lookup(t, DType::i32, probe).bitcast(DType::f32);
    code = where(above, probe, code);
  }
  return code;
}

Value aura_centroids(const Value& codes, int bits, int64_t D) {
  const std::vector<float> book = aura_codebook(bits, D);
  if (bits != 8) return lookup(f32_bits(book), DType::i32, codes).bitcast(DType::f32);
  // 256 entries as f16 words: half the table, and a CPU looks 32 up per
  // instruction pair.
  std::vector<int64_t> t;
  for (float f : book) t.push_back(static_cast<int64_t>(f32_to_f16_bits(f)));
  return lookup(t, DType::u16, codes).bitcast(DType::f16).to(DType::f32);
}

Value aura_pack(const Value& codes, int bits) {
  const Shape shape = codes.shape();
  const int64_t D = shape.back(), W = packed_words(D, bits);
  check_d(D, "pack");
  auto u = codes.to(DType::u32);
  if (32 % bits == 0) {
    const int64_t per = 32 / bits;
    Shape split = with_last(shape, W);
    split.push_back(per);
    auto shifts = (arange(per) * bits).to(DType::u32);
    return sum(reshape(u, split) << broadcast_to(shifts, split),
               static_cast<int>(split.size()) - 1);
  }
  // Straddling widths: each of a group's b words sums the pieces of the
  // coordinates that reach into it (disjoint bits, so the sum is the OR).
  const int64_t G = D / 32;
  Shape groups = with_last(shape, G);
  groups.push_back(32);
  auto g = reshape(u, groups);
  Lanes ln = group_lanes(bits);
  auto zero = zeros(DType::u32, groups);
  std::vector<Value> words;
  for (int wi = 0; wi < bits; ++wi) {
    auto own = where(broadcast_to(ln.w == wi, groups), g << broadcast_to(ln.r, groups), zero);
    auto spill_lane = ln.straddle & (ln.w + 1 == wi);
    auto spill =
        where(broadcast_to(spill_lane, groups), g >> broadcast_to(32 - ln.r, groups), zero);
    words.push_back(expand_dims(sum(own + spill, static_cast<int>(groups.size()) - 1),
                                static_cast<int>(groups.size()) - 1));
  }
  // [.., G, b] from the b word columns.
  Shape cols = with_last(groups, bits);
  auto col = arange(bits);
  Value all = zeros(DType::u32, cols);
  for (int wi = 0; wi < bits; ++wi)
    all = where(broadcast_to(col == wi, cols), broadcast_to(words[static_cast<size_t>(wi)], cols),
                all);
  return reshape(all, with_last(shape, W));
}

Value aura_unpack(const Value& words, int bits, int64_t D) {
  const Shape shape = words.shape();
  check_d(D, "unpack");
  if (shape.back() != packed_words(D, bits))
    throw Error("AURA unpack: " + std::to_string(shape.back()) + " words for " + std::to_string(D) +
                " codes of " + std::to_string(bits) + " bits");
  const uint32_t mask = (1u << bits) - 1;
  if (32 % bits == 0) {
    const int64_t per = 32 / bits;
    Shape split = shape;
    split.push_back(per);
    auto shifts = (arange(per) * bits).to(DType::u32);
    auto v = (broadcast_to(expand_dims(words, static_cast<int>(shape.size())), split) >>
              broadcast_to(shifts, split)) &
             mask;
    return reshape(v, with_last(shape, D)).to(DType::i32);
  }
  // Each group of 32 coordinates from its b words: a coordinate's low
  // piece from word w, shifted down by r, and a straddling one's high
  // piece from word w + 1 (never read past the group's words). The groups
  // as the rows of a matrix [R, b].
  int64_t R = 1;
  for (int64_t e : shape) R *= e;
  R = R / shape.back() * (D / 32);
  auto g = reshape(words, {R, bits});
  std::vector<Value> col;
  for (int wi = 0; wi < bits; ++wi) col.push_back(broadcast_to(slice(g, {0, wi}, {R, 1}), {R, 32}));
  Lanes ln = group_lanes(bits);
  auto wsel = broadcast_to(reshape(ln.w, {1, 32}), {R, 32});
  Value lo = col.back(), hi = col.back();
  for (int wi = bits - 2; wi >= 0; --wi) {
    lo = where(wsel == wi, col[static_cast<size_t>(wi)], lo);
    hi = where(wsel == wi, col[static_cast<size_t>(wi + 1)], hi);
  }
  auto r = broadcast_to(reshape(ln.r, {1, 32}), {R, 32});
  auto v = (lo >> r) | where(broadcast_to(reshape(ln.straddle, {1, 32}), {R, 32}), hi << (32 - r),
                             zeros(DType::u32, {R, 32}));
  return reshape(v & mask, with_last(shape, D)).to(DType::i32);
}

Value aura_group_codes(const Value& group, int bits, int64_t c, int64_t m) {
  const int64_t n = group.shape().back();
  const int64_t bit = c * bits, w = bit / 32, r = bit % 32;
  auto word = reshape(slice(group, {w, 0}, {1, n}), {1, n});
  if (bits == 8 && m == 4 && r == 0)  // the word's bytes, codes c .. c + 3
    return transpose(reshape(reshape(word, {n}).bitcast(DType::u8), {n, 4}));
  if (m > 1) {
    if (32 % bits || r + m * bits > 32)
      throw Error("AURA codes " + std::to_string(c) + " .. " + std::to_string(c + m - 1) + " of " +
                  std::to_string(bits) + " bits do not share a word");
    auto shifts = broadcast_to(reshape((arange(m) * bits + r).to(DType::u32), {m, 1}), {m, n});
    return ((broadcast_to(word, {m, n}) >> shifts) & ((1u << bits) - 1)).to(DType::i32);
  }
  Value v = word;
  if (r) v = v >> static_cast<uint32_t>(r);
  if (r + bits > 32)
    v = v | (reshape(slice(group, {w + 1, 0}, {1, n}), {1, n}) << static_cast<uint32_t>(32 - r));
  if (r + bits != 32) v = v & ((1u << bits) - 1);
  return v.to(DType::i32);
}

Value aura_unpack_lanes(const Value& words, int bits, int64_t D) {
  if (32 % bits) return aura_unpack(words, bits, D);
  const Shape shape = words.shape();
  const int64_t W = shape.back(), per = 32 / bits;
  if (W != packed_words(D, bits))
    throw Error("AURA unpack: " + std::to_string(W) + " words for " + std::to_string(D) +
                " codes of " + std::to_string(bits) + " bits");
  Shape split(shape.begin(), shape.end() - 1);
  split.push_back(per);
  split.push_back(W);
  const int axis = static_cast<int>(split.size()) - 2;
  auto shifts = broadcast_to(reshape((arange(per) * bits).to(DType::u32), {per, 1}), {per, W});
  auto v = (broadcast_to(expand_dims(words, axis), split) >> broadcast_to(shifts, split)) &
           ((1u << bits) - 1);
  return reshape(v, with_last(shape, D)).to(DType::i32);
}

Value aura_lanes_to_natural(const Value& x, int bits) {
  if (32 % bits) return x;
  const Shape shape = x.shape();
  if (shape.size() != 1) throw Error("aura_lanes_to_natural: expects a rank 1 tile");
  const int64_t D = shape.back(), per = 32 / bits;
  return reshape(transpose(reshape(x, {per, D / per})), {D});
}

}  // namespace kiln
