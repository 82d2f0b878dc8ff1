// AURA's compressed KV cache format (shared/design/AURA.md): every K and V
// head vector stored as b-bit Lloyd-Max codes of its direction after a
// seeded randomised Hadamard rotation, with one f16 corrected norm.
//
// This unit holds what the host needs to build, size and name such a
// cache: the scheme (K and V bits), the codebooks and thresholds, the
// rotation matrices the kernels multiply by, the packed row width and the
// bytes per token. The kernels' own view of the codes is aura_codes.h.
//
// Cache layout, per layer and kind (K or V), for a sequence of max_ctx rows:
//   codes [n_kv_heads][max_ctx][packed_words(D, bits)] u32, LSB-first
//         bitstream, coordinate i at stream bits [i*b, i*b + b) (a 3-bit
//         code may straddle two words);
//   norms [n_kv_heads][max_ctx] f16, the corrected norm ||x|| / ||c||.
// Row (h, n) starts at word (h * max_ctx + n) * packed_words(D, bits).
// The cache holds rotated vectors of D = aura_padded_dim(head_dim) dims;
// attention runs in that space (q rotated by the K rotation, the output
// rotated back by the V rotation's inverse), which preserves every score.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/spec.h"

namespace kiln {

// K and V bits, each 2, 3, 4 or 8.
struct AuraScheme {
  int kbits = 4, vbits = 4;
  bool operator==(const AuraScheme&) const = default;
};

// "aura4v4" / "aura8" (= aura8v8) -> scheme; throws kiln::Error naming the
// text and the accepted form.
AuraScheme parse_aura_scheme(const std::string& text);
bool is_aura_scheme_name(const std::string& text);  // starts with "aura"
bool is_aura_bits(int64_t bits);                    // 2, 3, 4 or 8
// Throws parse_aura_scheme's error for a scheme whose bits are not.
void check_aura_scheme(const AuraScheme& s);
// The checks every kernel over AURA codes makes of its spec: KBITS and
// VBITS 2, 3, 4 or 8, and rows of D = `rotated_dims` a power of two >= 32;
// throws kiln::Error naming `kernel`.
void check_aura_spec(const std::string& kernel, const Spec& s, int64_t rotated_dims);
std::string aura_scheme_name(const AuraScheme& s);  // "aura8v4"
// The opt-in auto-asymmetric rule (AURA.md section 6): K goes to 8 bits
// when the GQA group (n_head / n_head_kv) is 6 or more.
AuraScheme aura_auto_asymmetric(const AuraScheme& s, int64_t group);

// D: head_dim rounded up to a power of two (AURA pads with zeros).
int64_t aura_padded_dim(int64_t head_dim);
// u32 words of one packed row of D codes of b bits: ceil(D * b / 32).
int64_t packed_words(int64_t D, int bits);
// Cache bytes per token and layer: codes and f16 norms of K and V.
int64_t aura_bytes_per_token(int64_t n_kv_heads, int64_t head_dim, const AuraScheme& s);

// The Lloyd-Max quantiser of N(0, 1) with 2^bits levels, ascending, f64
// (computed offline by make_codebooks.py; tests re-derive it).
std::vector<double> lloyd_max_gaussian(int bits);
// The codebook the cache uses at dimension D: lloyd_max_gaussian / sqrt(D)
// in f32 (8 bits: rounded to f16, how the kernels store the 256 entries;
// AURA.md narrows codebook storage only, the rounding is < 5e-4 of a value
// and far inside its cell), and its thresholds t_j = (C[j-1] + C[j]) / 2 for j = 1 .. L-1
// (entry 0 is -inf): a coordinate y gets code #{j >= 1 : y > t_j}.
std::vector<float> aura_codebook(int bits, int64_t D);
std::vector<float> aura_thresholds(int bits, int64_t D);

// Default seed of the rotations; a saved cache records its own.
constexpr uint64_t kAuraSeed = 42;
enum class AuraKind { k = 0, v = 1 };
// The rotation's signs s in {-1, +1}^D for (layer, kind).
std::vector<float> aura_signs(uint64_t seed, int64_t layer, AuraKind kind, int64_t D);
// Pi = H_D diag(s) / sqrt(D), as the row-major [D, D] matrices kernels
// multiply row vectors by: forward F = Pi^T (y^T = u^T F, i.e. y = Pi u)
// and inverse Pi (x^T = y^T Pi, i.e. x = Pi^T y).
std::vector<float> aura_forward_matrix(const std::vector<float>& signs);
std::vector<float> aura_inverse_matrix(const std::vector<float>& signs);

}  // namespace kiln
