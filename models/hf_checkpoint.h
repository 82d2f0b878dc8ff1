// A Hugging Face model folder (config.json, tokenizer.json, safetensors)
// read as the GGUF file llama.cpp's converter would make of it.
//
// Kiln's loader and forwards read GGUF metadata and tensor names only, so a
// folder is translated once into that form: config.json into the
// <arch>.* keys, tokenizer.json into tokenizer.ggml.* (models/hf_tokenizer.h),
// Hugging Face tensor names into GGUF's, with llama's q/k rows permuted from
// HF's rotate-half order to GGUF's interleaved pairs, norms and the router
// widened to F32, and per-expert matrices stacked. Everything else is used
// in place in the mapped safetensors, so a folder costs no copy of its
// weights. The same translation written out is `kiln convert`.
//
// Quantized checkpoints keep their weights as they are where ggml has no
// type for them: block-scaled FP8 (quantization_config.quant_method "fp8",
// DeepSeek-V3 and Qwen3 FP8 releases) becomes tensor NAME of Kiln's
// in-memory type F8_E4M3 with its scales, F32 [cdiv(m, B), cdiv(k, B)]
// (GGUF order reversed; a stack of experts has one per expert), in NAME +
// kBlockScaleSuffix, B in metadata kWeightBlockSizeKey; the gemv and gemm
// kernels read them as they are.
// AutoAWQ's int4 (quant_method "awq", GEMM packing) is repacked once,
// value for value, into int4w rows (kernels/quant/awq.h): NAME of type I4
// [m, k] (codes, 2 a byte), NAME + kBlockScaleSuffix F16 [m, k / G] and
// NAME + kZeroPointSuffix U8 [m, k / G]. compressed-tensors' INT8
// (w8a8: int8 weights with a scale per output channel, activations
// quantised per token when run) becomes NAME of type I8_CHANNEL [m, k] and
// NAME + kBlockScaleSuffix F32 [m]. Stacks of experts [n_expert, m, k]
// carry their companions per expert alike. Written to a file
// (HfWeights::dequantized), FP8 and INT8 weights become BF16, AWQ's F16.
// GPT-OSS's MXFP4 experts (quant_method "mxfp4") are a ggml type: their
// blocks and scales are repacked into ggml's block_mxfp4 either way.
#pragma once

#include <memory>
#include <string>

#include "models/gguf.h"
#include "models/gguf_writer.h"

namespace kiln {

inline constexpr const char* kBlockScaleSuffix = "_scale";
inline constexpr const char* kZeroPointSuffix = "_zero";
inline constexpr const char* kWeightBlockSizeKey = "kiln.weight_block_size";

// How a quantized checkpoint's weights are translated: kept in Kiln's
// in-memory types (to run), or dequantized into GGUF types (to write).
enum class HfWeights { as_stored, dequantized };

class HfCheckpoint {
 public:
  // Reads and checks the folder (config against tensor shapes, dtypes).
  // Throws kiln::Error naming the file and the tensor or key.
  static std::shared_ptr<const HfCheckpoint> open(const std::string& dir,
                                                  HfWeights weights = HfWeights::as_stored);

  // The GGUF file the folder translates to, tensors streamed from it.
  const GgufWriter& gguf() const { return *writer_; }
  // The same, read in place: tensors point into the folder's mappings, and
  // the GgufFile keeps this checkpoint alive.
  static GgufFile open_file(std::shared_ptr<const HfCheckpoint> ck);

  struct Parts;

 private:
  std::shared_ptr<Parts> parts_;
  std::unique_ptr<GgufWriter> writer_;
};

// Whether `path` is a Hugging Face folder (a directory with config.json).
bool is_hf_checkpoint(const std::string& path);

// A GGUF file, or a Hugging Face folder read as one: what every command
// that takes -m MODEL opens (`weights`: how a folder's quantized weights
// are held).
GgufFile open_model_file(const std::string& path, HfWeights weights = HfWeights::as_stored);

}  // namespace kiln
