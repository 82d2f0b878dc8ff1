// Host side of the RoPE kernel: the cos/sin table it reads.
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

namespace kiln {

// How positions become angles, as llama.cpp's rope_ext: linear scaling
// divides positions by `factor`. YaRN interpolates only the low
// frequencies by the factor: the pairs whose wavelength fits orig_ctx
// fewer than beta_slow times are divided by it, those fitting more than
// beta_fast times are kept, a linear ramp blends the pairs between, and
// cos and sin are scaled by attn_factor * (1 + 0.1 ln factor); without
// YaRN, by attn_factor (LongRoPE's). Frequency factors (Llama 3's
// rope_freqs, LongRoPE's) divide each pair's angle before all that.
struct RopeScaling {
  double factor = 1;  // 1: none
  bool yarn = false;
  double orig_ctx = 0, attn_factor = 1, beta_fast = 32, beta_slow = 1;
  std::vector<float> freq_factors = {};  // one per rotated pair; empty: none
  auto operator<=>(const RopeScaling&) const = default;
};

// [n_pos, rot] f32: row p = cos(theta_i(p)) for i < rot/2, then the sines,
// theta_i(p) = p * base^(-2i/rot) / freq_factors[i] under `scaling`.
// Throws kiln::Error when freq_factors is neither empty nor rot/2 long.
std::vector<float> rope_cos_sin_table(double base, int64_t rot, int64_t n_pos,
                                      const RopeScaling& scaling = {});

}  // namespace kiln
