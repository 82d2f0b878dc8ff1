#include "models/gguf_quantize.h"

#include <algorithm>
#include <map>
#include <thread>

#include "ir/error.h"
#include "models/chunk_stream.h"
#include "models/gguf_writer.h"
#include "models/model_config.h"

namespace kiln {

namespace {

// The model's shapes as a preset, so the generator's plan applies to it.
ModelPreset preset_of(const GgufFile& in, const ModelConfig& c) {
  ModelPreset p;
  p.family = c.arch == "llama" && c.moe() ? "llama-moe" : c.arch;
  p.preset = "(" + in.path() + ")";
  p.arch = c.arch;
  p.n_ctx = c.n_ctx_train;
  p.n_embd = c.n_embd;
  p.n_layer = c.n_layer;
  p.n_head = c.n_head;
  p.n_head_kv = c.n_head_kv;
  p.head_dim = c.head_dim;
  p.n_ff = c.moe() && c.n_ff <= 0 ? c.n_ff_exp : c.n_ff;
  p.n_expert = c.n_expert;
  p.n_expert_used = c.n_expert_used;
  p.n_ff_exp = c.moe() ? c.n_ff_exp : 0;
  p.tied_embeddings = c.tied_embeddings;
  return p;
}

}  // namespace

void quantize_gguf(const GgufFile& in, WeightFormat format, const std::string& path, int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const ModelConfig cfg = ModelConfig::from_gguf(in);
  std::map<std::string, TensorType> planned;
  for (const PlannedTensor& t : plan_model_tensors(preset_of(in, cfg), cfg.n_vocab, format)) {
    const GgufTensor* have = in.find_tensor(t.name);
    if (!have || have->shape != t.shape)
      in.fail("tensor '" + t.name + "' is missing or not of the shape its architecture gives it");
    planned[t.name] = t.type;
  }
  GgufWriter w;
  for (const auto& [key, v] : in.metadata())
    if (key != "general.file_type" && key != "general.quantization_version")
      w.add(key, GgufWriter::copy_of(v));
  w.add("general.file_type", GgufWriter::u32(llama_file_type(format)));
  w.add("general.quantization_version", GgufWriter::u32(2));
  for (const GgufTensor& t : in.tensors()) {
    auto it = planned.find(t.name);
    const TensorType to = it == planned.end() ? t.type : it->second;
    if (to == t.type) {
      w.add_tensor(t.name, t.type, t.shape,
                   std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes));
      continue;
    }
    if (is_block_quantized(t.type))
      in.fail("tensor '" + t.name + "' is " + tensor_type_name(t.type) + ", not a float type " +
              tensor_type_name(to) + " can be made from");
    w.add_tensor(t.name, to, t.shape, [&t, to, threads](const GgufWriter::ByteSink& sink) {
      const int64_t ne0 = t.shape[0], rows = t.elements() / ne0;
      const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 20) / ne0);
      stream_chunks((rows + chunk_rows - 1) / chunk_rows, threads,
                    [&](int64_t chunk, std::vector<uint8_t>* out) {
                      thread_local std::vector<float> x;
                      const int64_t r = chunk * chunk_rows, n = std::min(chunk_rows, rows - r);
                      x.resize(static_cast<size_t>(n * ne0));
                      ggml_to_f32(t.type, t.data + ggml_row_bytes(t.type, ne0) * r, n * ne0,
                                  x.data());
                      out->resize(static_cast<size_t>(ggml_row_bytes(to, ne0) * n));
                      ggml_from_f32(to, x.data(), n * ne0, out->data());
                    },
                    sink);
    });
  }
  w.write(path);
}

}  // namespace kiln
