#include "kernels/moe/expert_tiles.h"

#include "ir/error.h"

namespace kiln {

Grouping grouping(const Spec& s) {
  if (!s.has_constexpr("GROUPED")) return Grouping::plain;
  const int64_t g = s.constexpr_("GROUPED");
  if (g < 0 || g > 2)
    throw Error("kernel '" + s.kernel + "': GROUPED = " + std::to_string(g) +
                " (0 plain, 1 gather, 2 sorted)");
  return static_cast<Grouping>(g);
}

ExpertTiles::ExpertTiles(KernelBuilder& k, const Spec& s, int64_t tile, const Value& t,
                         const Value& row_block_bytes)
    : k_(k), mode_(grouping(s)), t_(t) {
  if (grouped()) {
    first_ = k.program_id(1) * static_cast<int>(tile);
    row_ = k.program_id(0);
  } else if (!row_block_bytes.valid()) {
    first_ = k.program_id(0) * static_cast<int>(tile);
    row_ = k.program_id(1);
  } else {
    // Linear program l = p0 + n0 p1 runs band l / (n0 band) with the token
    // tile fastest across the band's row blocks (the last band may be
    // short). One token tile (a decode) keeps the plain order and skips the
    // divisions: by estimate some 100 cycles, where a decode program over
    // 16 IQ4_XS rows of 1024 takes about 1500.
    auto row = k.var(k.program_id(1)), slot = k.var(k.program_id(0));
    auto n0 = k.num_programs(0), n1 = k.num_programs(1);
    k.if_(n0 > 1, [&] {
      constexpr int kBandBytes = 512 << 10;
      auto band = minimum(maximum(full({}, kBandBytes, DType::i32) / row_block_bytes, 1), 16);
      auto lin = k.program_id(0) + n0 * k.program_id(1);
      auto b = lin / (n0 * band);
      auto first_row = b * band;
      auto size = minimum(n1 - first_row, band);
      auto r = lin - b * (n0 * band);
      row = first_row + r % size;
      slot = r / size;
    });
    row_ = row;
    first_ = Value(slot) * static_cast<int>(tile);
  }
  if (!grouped()) return;
  tile_expert_.emplace(k.buffer("tile_expert", DType::i32));
  if (mode_ == Grouping::gather) sorted_.emplace(k.buffer("sorted", DType::i32));
  n_expert_ = k.scalar("n_expert", DType::i32);
  w_stride_ = k.scalar("w_stride", DType::i32);
  if (mode_ == Grouping::gather) k.scalar("tokens", DType::i32);
  expert_ = load(*tile_expert_ + k.program_id(1));
}

Value ExpertTiles::row_block() const { return row_; }

Value ExpertTiles::x_row(const Value& pos) const {
  if (mode_ != Grouping::gather) return pos;
  auto row = load(*sorted_ + pos);
  return where(row < 0, load(*sorted_ + first_), row);  // padding repeats the tile's first token
}

std::vector<Value> ExpertTiles::x_rows(int64_t n) const {
  std::vector<Value> rows;
  for (int64_t i = 0; i < n; ++i) {
    auto pos = first_ + static_cast<int>(i);
    rows.push_back(grouped() ? x_row(pos) : minimum(pos, t_ - 1));
  }
  return rows;
}

Value ExpertTiles::x_row_tile(int64_t n) const {
  auto pos = first_ + arange(n);
  return grouped() ? x_row(pos) : minimum(pos, t_ - 1);
}

Buffer ExpertTiles::weights(const Buffer& w) const {
  return grouped() ? of_expert(w, w_stride_.to(DType::i64)) : w;
}

Buffer ExpertTiles::of_expert(const Buffer& b, const Value& stride) const {
  return grouped() ? b.at(expert_.to(DType::i64) * stride) : b;
}

void ExpertTiles::run(const std::function<void()>& body) const {
  if (!grouped()) {
    body();
    return;
  }
  k_.if_((expert_ >= 0) & (expert_ < n_expert_), body);
}

LaunchShape expert_tiles_launch(const std::string& kernel, const Spec& s, const ScalarArgs& a,
                                LaunchShape plain, int64_t tile, const std::string& w,
                                const std::map<std::string, int64_t>& x_per_row) {
  const Grouping mode = grouping(s);
  if (mode == Grouping::plain) return plain;
  const std::string who = "kernel '" + kernel + "' (grouped): ";
  const int64_t t = a.i("t"), n_expert = a.i("n_expert"), stride = a.i("w_stride");
  if (t % tile)
    throw Error(who + "t = " + std::to_string(t) + " rows is not a multiple of the tile of " +
                std::to_string(tile) + " (moe_sort's TILE must equal the kernel's)");
  if (n_expert < 1) throw Error(who + "n_expert = " + std::to_string(n_expert) + " (need >= 1)");
  const int64_t one = plain.buffer_elems.at(w);
  if (stride < one)
    throw Error(who + "w_stride = " + std::to_string(stride) +
                " elements is less than one expert's matrix (" + std::to_string(one) + ")");
  plain.buffer_elems[w] = n_expert * stride;
  plain.buffer_elems["tile_expert"] = t / tile;
  if (mode == Grouping::gather) {
    const int64_t tokens = a.i("tokens");
    if (tokens < 1) throw Error(who + "tokens = " + std::to_string(tokens) + " (need >= 1)");
    plain.buffer_elems["sorted"] = t;
    for (const auto& [name, per_row] : x_per_row) plain.buffer_elems[name] = tokens * per_row;
  }
  std::swap(plain.grid[0], plain.grid[1]);
  return plain;
}

}  // namespace kiln
