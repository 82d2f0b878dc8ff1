#include "kernels/aura/aura_format.h"

#include <bit>
#include <cmath>
#include <iterator>
#include <limits>
#include <regex>

#include "ir/dtype.h"
#include "ir/error.h"

namespace kiln {

namespace {
#include "kernels/aura/aura_codebooks.inc"

void check_bits(int bits) {
  if (!is_aura_bits(bits))
    throw Error("AURA codes of " + std::to_string(bits) + " bits: expected 2, 3, 4 or 8");
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

[[noreturn]] void bad_scheme(const std::string& text) {
  throw Error("AURA scheme '" + text +
              "': expected aura<K bits>v<V bits> or aura<bits>, bits 2, 3, 4 or 8 (aura4v4, "
              "aura8v4, aura3)");
}
}  // namespace

bool is_aura_bits(int64_t bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 8; }

void check_aura_scheme(const AuraScheme& s) {
  if (!is_aura_bits(s.kbits) || !is_aura_bits(s.vbits)) bad_scheme(aura_scheme_name(s));
}

void check_aura_spec(const std::string& kernel, const Spec& s, int64_t rotated_dims) {
  for (const char* b : {"KBITS", "VBITS"}) {
    const int64_t v = s.constexpr_(b);
    if (!is_aura_bits(v))
      throw Error("kernel '" + kernel + "': " + b + " = " + std::to_string(v) +
                  " (AURA codes have 2, 3, 4 or 8 bits)");
  }
  if (rotated_dims < 32 || aura_padded_dim(rotated_dims) != rotated_dims)
    throw Error("kernel '" + kernel + "': AURA rows of " + std::to_string(rotated_dims) +
                " rotated dims (need a power of two >= 32)");
}

AuraScheme parse_aura_scheme(const std::string& text) {
  static const std::regex form("^aura([2348])(v([2348]))?$");
  std::smatch m;
  if (!std::regex_match(text, m, form)) bad_scheme(text);
  const int kb = std::stoi(m[1].str());
  return {kb, m[3].matched ? std::stoi(m[3].str()) : kb};
}

bool is_aura_scheme_name(const std::string& text) { return text.rfind("aura", 0) == 0; }

std::string aura_scheme_name(const AuraScheme& s) {
  return "aura" + std::to_string(s.kbits) + "v" + std::to_string(s.vbits);
}

AuraScheme aura_auto_asymmetric(const AuraScheme& s, int64_t group) {
  if (group >= 6 && s.kbits < 8) return {8, s.vbits};
  return s;
}

int64_t aura_padded_dim(int64_t head_dim) {
  if (head_dim < 1) throw Error("AURA: head_dim " + std::to_string(head_dim) + " < 1");
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(head_dim)));
}

int64_t packed_words(int64_t D, int bits) {
  check_bits(bits);
  return (D * bits + 31) / 32;
}

int64_t aura_bytes_per_token(int64_t n_kv_heads, int64_t head_dim, const AuraScheme& s) {
  const int64_t D = aura_padded_dim(head_dim);
  return n_kv_heads * (4 * packed_words(D, s.kbits) + 4 * packed_words(D, s.vbits) + 2 + 2);
}

std::vector<double> lloyd_max_gaussian(int bits) {
  check_bits(bits);
  switch (bits) {
    case 2: return {std::begin(kLloydMax2), std::end(kLloydMax2)};
    case 3: return {std::begin(kLloydMax3), std::end(kLloydMax3)};
    case 4: return {std::begin(kLloydMax4), std::end(kLloydMax4)};
    default: return {std::begin(kLloydMax8), std::end(kLloydMax8)};
  }
}

std::vector<float> aura_codebook(int bits, int64_t D) {
  std::vector<float> c;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (double z : lloyd_max_gaussian(bits)) {
    const float v = static_cast<float>(z * scale);
    c.push_back(bits == 8 ? round_to_float_dtype(v, DType::f16) : v);
  }
  return c;
}

std::vector<float> aura_thresholds(int bits, int64_t D) {
  std::vector<float> c = aura_codebook(bits, D);
  std::vector<float> t = {-std::numeric_limits<float>::infinity()};
  for (size_t j = 1; j < c.size(); ++j) t.push_back((c[j - 1] + c[j]) / 2);
  return t;
}

std::vector<float> aura_signs(uint64_t seed, int64_t layer, AuraKind kind, int64_t D) {
  const uint64_t key =
      seed ^ ((2 * static_cast<uint64_t>(layer) + static_cast<uint64_t>(kind) + 1) *
              0x9E3779B97F4A7C15ull);
  std::vector<float> s(static_cast<size_t>(D));
  for (int64_t i = 0; i < D; ++i)
    s[static_cast<size_t>(i)] = (splitmix64(key + static_cast<uint64_t>(i)) >> 63) ? -1.f : 1.f;
  return s;
}

namespace {
// H_D[r][c] * s[r or c] / sqrt(D), row-major; Sylvester's H_D[r][c] is
// (-1)^popcount(r & c).
std::vector<float> signed_hadamard(const std::vector<float>& s, bool sign_by_row) {
  const int64_t D = static_cast<int64_t>(s.size());
  if (D < 1 || !std::has_single_bit(static_cast<uint64_t>(D)))
    throw Error("AURA rotation of " + std::to_string(D) + " dims: not a power of two");
  const float inv = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  std::vector<float> m(static_cast<size_t>(D * D));
  for (int64_t r = 0; r < D; ++r)
    for (int64_t c = 0; c < D; ++c) {
      const float h = (std::popcount(static_cast<uint64_t>(r & c)) & 1) ? -inv : inv;
      m[static_cast<size_t>(r * D + c)] = h * s[static_cast<size_t>(sign_by_row ? r : c)];
    }
  return m;
}
}  // namespace

std::vector<float> aura_forward_matrix(const std::vector<float>& signs) {
  return signed_hadamard(signs, true);
}

std::vector<float> aura_inverse_matrix(const std::vector<float>& signs) {
  return signed_hadamard(signs, false);
}

}  // namespace kiln
