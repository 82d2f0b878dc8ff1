// Scalar references for AURA (shared/design/AURA.md), written from the
// specification and independent of the kernels and of aura_format.cpp's
// matrices: the rotation as an in-place fast Walsh-Hadamard transform, the
// encoder (norm, direction, compare-count codes, corrected norm), the
// bitstream packing with its straddling words, and decoding back to the
// original space.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/aura/aura_format.h"

namespace kiln::test {

// The Walsh-Hadamard transform in place (natural order), log2(D) stages.
template <class T>
void ref_fwht(std::vector<T>& v) {
  for (size_t h = 1; h < v.size(); h *= 2)
    for (size_t i = 0; i < v.size(); ++i)
      if (!(i & h)) {
        const T a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
}

// y = FWHT(s . u) / sqrt(D) (forward) or x = s . FWHT(y) / sqrt(D)
// (inverse), in f32 as the specification states.
inline std::vector<float> ref_rotate(std::vector<float> v, const std::vector<float>& s,
                                     bool inverse) {
  const size_t D = s.size();
  v.resize(D, 0.f);
  if (!inverse)
    for (size_t i = 0; i < D; ++i) v[i] *= s[i];
  ref_fwht(v);
  const float inv = 1.f / std::sqrt(static_cast<float>(D));
  for (size_t i = 0; i < D; ++i) v[i] *= inverse ? inv * s[i] : inv;
  return v;
}

struct RefEncoded {
  std::vector<int> codes;  // D
  std::vector<float> y;    // the rotated unit vector, D
  float norm = 0;          // corrected, before f16 rounding
};

// Encodes x (head_dim values) with b-bit codes under signs s (D entries).
inline RefEncoded ref_encode(const std::vector<float>& x, const std::vector<float>& s, int bits) {
  const int64_t D = static_cast<int64_t>(s.size());
  float nu2 = 0;
  for (float e : x) nu2 += e * e;
  const float nu = std::sqrt(nu2);
  std::vector<float> u(x.size(), 0.f);
  if (nu > 1e-8f)
    for (size_t i = 0; i < x.size(); ++i) u[i] = x[i] / nu;
  RefEncoded r;
  r.y = ref_rotate(u, s, false);
  const std::vector<float> t = aura_thresholds(bits, D), c = aura_codebook(bits, D);
  float rho2 = 0;
  for (int64_t i = 0; i < D; ++i) {
    int code = 0;
    for (size_t j = 1; j < t.size(); ++j) code += r.y[i] > t[j];
    r.codes.push_back(code);
    rho2 += c[code] * c[code];
  }
  const float rho = std::sqrt(rho2);
  r.norm = rho > 1e-8f ? nu / rho : nu;
  return r;
}

// The corrected norm of x for given codes (as the encoder computes it).
inline float ref_norm(const std::vector<float>& x, const std::vector<int>& codes, int bits) {
  const std::vector<float> c = aura_codebook(bits, static_cast<int64_t>(codes.size()));
  float nu2 = 0, rho2 = 0;
  for (float e : x) nu2 += e * e;
  for (int k : codes) rho2 += c[k] * c[k];
  const float nu = std::sqrt(nu2), rho = std::sqrt(rho2);
  return rho > 1e-8f ? nu / rho : nu;
}

// AURA.md section 4's bitstream: coordinate i at stream bits [i*b, i*b+b).
inline std::vector<uint32_t> ref_pack(const std::vector<int>& codes, int bits) {
  std::vector<uint32_t> w(
      static_cast<size_t>(packed_words(static_cast<int64_t>(codes.size()), bits)), 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    const size_t bit = i * bits, wi = bit / 32, r = bit % 32;
    w[wi] |= static_cast<uint32_t>(codes[i]) << r;
    if (r + bits > 32) w[wi + 1] |= static_cast<uint32_t>(codes[i]) >> (32 - r);
  }
  return w;
}

inline std::vector<int> ref_unpack(const uint32_t* w, int64_t D, int bits) {
  std::vector<int> codes;
  for (int64_t i = 0; i < D; ++i) {
    const int64_t bit = i * bits, wi = bit / 32, r = bit % 32;
    uint32_t v = w[wi] >> r;
    if (r + bits > 32) v |= w[wi + 1] << (32 - r);
    codes.push_back(static_cast<int>(v & ((1u << bits) - 1)));
  }
  return codes;
}

// The decoded vector in the cache's rotated space, norm * C[code] (D).
inline std::vector<double> ref_rotated(const std::vector<int>& codes, double norm, int bits) {
  const std::vector<float> c = aura_codebook(bits, static_cast<int64_t>(codes.size()));
  std::vector<double> v;
  for (int k : codes) v.push_back(norm * c[k]);
  return v;
}

// Pi^T v in double, the first head_dim entries: a rotated vector back in the
// original space.
inline std::vector<double> ref_unrotate(const std::vector<double>& v, const std::vector<float>& s,
                                        int64_t head_dim) {
  const size_t D = s.size();
  std::vector<double> x(v);
  ref_fwht(x);
  for (size_t i = 0; i < D; ++i) x[i] *= s[i] / std::sqrt(static_cast<double>(D));
  x.resize(static_cast<size_t>(head_dim));
  return x;
}

}  // namespace kiln::test
