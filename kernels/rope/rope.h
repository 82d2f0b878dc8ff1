// Host side of the RoPE kernel: the cos/sin table it reads.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

// [n_pos, rot] f32: row p = cos(p * base^(-2i/rot)) for i < rot/2, then the sines.
std::vector<float> rope_cos_sin_table(double base, int64_t rot, int64_t n_pos);

}  // namespace kiln
