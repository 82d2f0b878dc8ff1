// A GGUF model's tensors as graph operands (runtime/ops.h's Weight and
// Tensor), in the memory the runtime's backend reads.
//
// On host-memory backends the tensors are used in place in the mapped file,
// except block-quantized matrices, which are interleaved once at load for
// the 16-row kernels (models/packed_weights.h); on a device every tensor is
// uploaded once, on first use, and shared by every plan after.
#pragma once

#include <map>
#include <string>

#include "models/gguf.h"
#include "models/packed_weights.h"
#include "runtime/ops.h"

namespace kiln {

class ModelWeights {
 public:
  ModelWeights(const GgufFile& file, Runtime& rt);

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  // The matrix `name` [m, k]; `label` names its matmuls in a profile.
  Weight matrix(Graph& g, const std::string& name, const std::string& label);
  // Rows [row0, row0 + rows) of the matrix `name`: one projection of a
  // fused one (Phi-3's attn_qkv, its gate-then-up ffn_up), read in place.
  // Float and ggml block types only (the others' scales are not split).
  Weight matrix_rows(Graph& g, const std::string& name, const std::string& label, int64_t row0,
                     int64_t rows);
  // A 3-D expert tensor (ne = [k, m, n_expert]) as a stack of experts.
  Weight experts(Graph& g, const std::string& name, const std::string& label);
  // An F32 vector (a norm's weight, a bias).
  Tensor vector(Graph& g, const std::string& name);
  // An F32 matrix of one bias per expert (ne = [n, n_expert]).
  Tensor expert_biases(Graph& g, const std::string& name);

  // The file's tensor bytes, and the memory of what was made from them at
  // load or first use (interleaved copies, device uploads).
  size_t file_bytes() const;
  size_t copied_bytes() const;

 private:
  Weight stack(Graph& g, const GgufTensor& t, const std::string& label);
  void block_scales(Graph& g, const GgufTensor& t, Weight& w);
  Weight int4(Graph& g, const GgufTensor& t, Weight w);
  Weight int8(Graph& g, const GgufTensor& t, Weight w);
  const uint8_t* on_backend(const uint8_t* host, size_t bytes);

  const GgufFile& file_;
  Backend& backend_;
  PackedWeights packed_;
  std::map<const uint8_t*, DeviceBuffer> uploaded_;
};

}  // namespace kiln
