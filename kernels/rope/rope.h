// Host side of the RoPE kernel: the cos/sin table it reads.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

// [n_pos, rot] f32: row p = cos(p * freq_scale * base^(-2i/rot)) for
// i < rot/2, then the sines. freq_scale < 1 is linear rope scaling (1 /
// the factor), as llama.cpp's rope with ext_factor 0 applies it.
std::vector<float> rope_cos_sin_table(double base, int64_t rot, int64_t n_pos,
                                      double freq_scale = 1);

}  // namespace kiln
