// Random-weight GGUF models of real architectures, written the way llama.cpp
// writes them, for tests, benchmarks and comparisons with llama.cpp.
//
// Trained weights are large and licensed; Kiln's model code needs files of
// the right shapes, types and metadata, not good answers. A generated model
// has llama.cpp's tensor names and ggml shapes, its converter's metadata, and
// llama-quantize's per-tensor type choices (Q4_K_M's Q6_K layers included),
// so both Kiln and llama.cpp load it and their logits can be compared. Weights
// are seeded normals, generated and quantised tensor by tensor, chunk by chunk
// on all threads, and streamed to the file: a 1.1B model never sits in memory
// as floats, and the same seed always gives the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_presets.h"
#include "models/tensor_codec.h"

namespace kiln {

// How the weight matrices are stored, as llama.cpp's file types name it.
enum class WeightFormat {
  f32,
  f16,
  q8_0,
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q2_k,
  q3_k_m,
  q4_k_m,
  q5_k_m,
  iq4_nl,
  iq4_xs
};

// "f16" -> WeightFormat::f16; a kiln::Error listing the known names otherwise.
WeightFormat parse_weight_format(std::string_view name);
std::string_view weight_format_name(WeightFormat f);
// general.file_type: llama.cpp's LLAMA_FTYPE (ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2,
// MOSTLY_Q8_0 7, MOSTLY_Q4_1 3, MOSTLY_Q5_0 8, MOSTLY_Q5_1 9, MOSTLY_Q2_K 10,
// MOSTLY_Q3_K_M 12, MOSTLY_Q4_K_M 15, MOSTLY_Q5_K_M 17, MOSTLY_IQ4_NL 25,
// MOSTLY_IQ4_XS 30).
uint32_t llama_file_type(WeightFormat f);

// One tensor of a generated model: where it goes, how it is stored and what
// its elements are drawn from (normal with this mean and deviation).
struct PlannedTensor {
  std::string name;            // llama.cpp's: "blk.3.attn_q.weight"
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous dimension
  TensorType type = TensorType::f32;
  float mean = 0, stddev = 0;
  int layer = -1;    // -1 outside the blocks
  std::string note;  // why the type differs from the format's rule ("" when it does not)

  int64_t elements() const;
};

// The model's tensors in file order, each with the type llama.cpp's converter
// (f32, f16, q8_0) or llama-quantize (the rest) gives it: 1-D tensors, norms
// and the expert router stay f32; output.weight (or a tied token_embd) is
// Q6_K in every mix; models of exactly 8 experts store attn_k and attn_v as
// Q8_0. The K mixes follow llama-quantize's per-tensor rules:
// - q4_k_m / q5_k_m: attn_v and ffn_down of the use_more_bits layers Q6_K;
// - q3_k_m: attn_v Q5_K in layers 0-1, else Q4_K; ffn_down Q5_K in the
//   first sixteenth of the layers, else Q4_K; attn_output Q4_K;
// - q2_k: attn_v Q4_K with 4 or more query heads per KV head, else Q3_K;
//   ffn_down and attn_output Q3_K;
// - iq4_nl / iq4_xs (no importance matrix): attn_v Q5_K with 4 or more
//   query heads per KV head; ffn_down Q5_K in the first eighth of the layers;
// - 8-expert models' attn_output Q5_K in q2_k, q3_k_m, q4_k_m, iq4_nl and
//   iq4_xs.
// Rows that are not a multiple of 256 take llama.cpp's fallbacks (Q2_K and
// Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL); rows that are not
// a multiple of 32 fall back to F16.
std::vector<PlannedTensor> plan_model_tensors(const ModelPreset& p, int64_t n_vocab,
                                              WeightFormat format);

struct GenModelOptions {
  WeightFormat format = WeightFormat::f16;
  std::string vocab_path;  // a GGUF whose tokenizer.* keys are copied; "": byte-level vocabulary
  uint64_t seed = 0;
  int threads = 0;  // 0: all hardware threads (the bytes do not depend on it)
};

struct GenModelSummary {
  int64_t n_vocab = 0;
  int64_t params = 0;  // elements over all tensors
  uint64_t file_bytes = 0;
  std::vector<PlannedTensor> tensors;
};

// Writes the model to `path` (through `path`.partial, renamed when complete).
// Throws kiln::Error naming the file, the vocabulary or the preset.
GenModelSummary generate_model(const ModelPreset& p, const GenModelOptions& options,
                               const std::string& path);

}  // namespace kiln
