#include "models/model_weights.h"

#include <algorithm>

#include "ir/error.h"
#include "kernels/quant/int4w.h"
#include "kernels/quant/rows16.h"
#include "models/hf_checkpoint.h"

namespace kiln {

namespace {

DType float_dtype(const GgufTensor& t) {
  switch (t.type) {
    case TensorType::f32: return DType::f32;
    case TensorType::f16: return DType::f16;
    case TensorType::bf16: return DType::bf16;
    case TensorType::f8_e4m3: return DType::f8e4m3;
    default:
      throw Error("tensor '" + t.name + "' has type " + tensor_type_name(t.type) +
                  ", which Kiln's matmuls do not read");
  }
}

}  // namespace

ModelWeights::ModelWeights(const GgufFile& file, Runtime& rt)
    : file_(file), backend_(rt.backend()), packed_(file, rt) {}

const uint8_t* ModelWeights::on_backend(const uint8_t* host, size_t bytes) {
  if (backend_.host_visible()) return host;
  auto it = uploaded_.find(host);
  if (it == uploaded_.end()) {
    it = uploaded_.emplace(host, DeviceBuffer(backend_, bytes)).first;
    backend_.upload(it->second.data(), host, bytes);
  }
  return it->second.as<uint8_t>();
}

Weight ModelWeights::matrix(Graph& g, const std::string& name, const std::string& label) {
  const GgufTensor& t = file_.tensor(name);
  if (t.shape.size() != 2) throw Error("tensor '" + name + "' is not a matrix");
  return stack(g, t, label);
}

Weight ModelWeights::matrix_rows(Graph& g, const std::string& name, const std::string& label,
                                 int64_t row0, int64_t rows) {
  const GgufTensor& t = file_.tensor(name);
  if (t.shape.size() != 2) throw Error("tensor '" + name + "' is not a matrix");
  const std::string part =
      name + " rows " + std::to_string(row0) + ".." + std::to_string(row0 + rows);
  if (row0 < 0 || rows <= 0 || row0 + rows > t.shape[1])
    throw Error("tensor '" + name + "' has " + std::to_string(t.shape[1]) +
                " rows; the model's shapes need " + part);
  if (t.type == TensorType::i4 || t.type == TensorType::i8_channel || t.type == TensorType::f8_e4m3)
    throw Error("tensor '" + name + "' is " + tensor_type_name(t.type) +
                ": a fused matrix is split only in float and ggml block types");
  const int64_t row_bytes = ggml_row_bytes(t.type, t.shape[0]);
  GgufTensor p = t;
  p.name = part;
  p.shape[1] = rows;
  p.data = t.data + row0 * row_bytes;
  p.nbytes = static_cast<uint64_t>(rows * row_bytes);
  Weight w = stack(g, p, label);
  // The interleaved copy holds 16-row groups in order: a part of whole
  // groups is a slice of it.
  const uint8_t* interleaved = packed_.rows16(t);
  if (interleaved && row0 % 16 == 0 && rows % 16 == 0) {
    const int64_t group = ggml::rows16_bytes(t.type, 16, t.shape[0]);
    const int64_t bytes = rows / 16 * group;
    w.rows16 = g.external(on_backend(interleaved + row0 / 16 * group, static_cast<size_t>(bytes)),
                          DType::u8, {bytes});
  }
  return w;
}

Weight ModelWeights::experts(Graph& g, const std::string& name, const std::string& label) {
  const GgufTensor& t = file_.tensor(name);
  if (t.shape.size() != 3)
    throw Error("tensor '" + name + "' is not a stack of experts [k, m, n_expert]");
  return stack(g, t, label);
}

Weight ModelWeights::stack(Graph& g, const GgufTensor& t, const std::string& label) {
  const int64_t k = t.shape[0], m = t.shape[1];
  const int64_t mats = t.shape.size() > 2 ? t.shape[2] : 1;
  const int64_t row_bytes = ggml_row_bytes(t.type, k);
  const uint8_t* data = on_backend(t.data, t.nbytes);
  Weight w;
  w.label = label;
  w.m = m;
  w.k = k;
  w.experts = t.shape.size() > 2 ? mats : 0;
  if (t.type == TensorType::i4) return int4(g, t, w);
  if (t.type == TensorType::i8_channel) return int8(g, t, w);
  if (!is_block_quantized(t.type)) {
    w.data = g.external(data, float_dtype(t), {mats * m, k});
    if (t.type == TensorType::f8_e4m3) block_scales(g, t, w);
    return w;
  }
  w.quant = t.type;
  w.data = g.external(data, DType::u8, {mats * m, row_bytes});
  if (const uint8_t* rows16 = packed_.rows16(t)) {
    int64_t bytes = ggml::rows16_bytes(t.type, m, k);
    w.rows16 = g.external(on_backend(rows16, static_cast<size_t>(bytes * mats)), DType::u8,
                          {bytes * mats});
  }
  return w;
}

// An FP8 matrix's scales, in the companion tensor the Hugging Face
// translation made (models/hf_checkpoint.h).
void ModelWeights::block_scales(Graph& g, const GgufTensor& t, Weight& w) {
  const std::string name = t.name + kBlockScaleSuffix;
  const GgufTensor* s = file_.find_tensor(name);
  const int64_t b = file_.find(kWeightBlockSizeKey) ? file_.get_u32(kWeightBlockSizeKey) : 0;
  // A stack of experts has a scale matrix per expert, one after another.
  std::vector<int64_t> want = {(w.k + b - 1) / b, (w.m + b - 1) / b};
  if (w.experts) want.push_back(w.experts);
  if (!s || b <= 0 || s->type != TensorType::f32 || s->shape != want)
    throw Error("FP8 tensor '" + t.name + "' has no F32 block scales '" + name + "' of " +
                std::string(kWeightBlockSizeKey) + " " + std::to_string(b) + " beside it");
  w.scales = g.external(on_backend(s->data, s->nbytes), DType::f32,
                        {std::max<int64_t>(w.experts, 1) * want[1], want[0]});
  w.scale_block = b;
}

// An int4 matrix with its scales and zero points (models/hf_checkpoint.h),
// and its 16-row interleave when the loader made one.
Weight ModelWeights::int4(Graph& g, const GgufTensor& t, Weight w) {
  const GgufTensor* s = file_.find_tensor(t.name + kBlockScaleSuffix);
  const GgufTensor* z = file_.find_tensor(t.name + kZeroPointSuffix);
  const int64_t mats = std::max<int64_t>(w.experts, 1), rows = mats * w.m;
  const int64_t groups = s && !s->shape.empty() ? s->shape[0] : 0;
  std::vector<int64_t> want = {groups, w.m};
  if (w.experts) want.push_back(w.experts);
  if (!s || !z || s->type != TensorType::f16 || z->type != TensorType::u8 || s->shape != want ||
      groups <= 0 || w.k % groups || z->shape != s->shape)
    throw Error("int4 tensor '" + t.name + "' has no F16 scales '" + t.name + kBlockScaleSuffix +
                "' and U8 zero points '" + t.name + kZeroPointSuffix +
                "' [m, k / group] (per expert) beside it");
  w.quant = TensorType::i4;
  w.scale_block = w.k / groups;
  w.data = g.external(on_backend(t.data, t.nbytes), DType::u8, {rows, w.k / 2});
  w.scales = g.external(on_backend(s->data, s->nbytes), DType::f16, {rows, groups});
  w.zeros = g.external(on_backend(z->data, z->nbytes), DType::u8, {rows, groups});
  if (const uint8_t* rows16 = packed_.rows16(t)) {
    const int64_t bytes = Int4wRows16{w.scale_block, true}.bytes(rows, w.k);
    w.rows16 = g.external(on_backend(rows16, static_cast<size_t>(bytes)), DType::u8, {bytes});
  }
  return w;
}

// An INT8 matrix with its scale per row (models/hf_checkpoint.h).
Weight ModelWeights::int8(Graph& g, const GgufTensor& t, Weight w) {
  const GgufTensor* s = file_.find_tensor(t.name + kBlockScaleSuffix);
  std::vector<int64_t> want = {w.m};
  if (w.experts) want.push_back(w.experts);
  if (!s || s->type != TensorType::f32 || s->shape != want)
    throw Error("int8 tensor '" + t.name + "' has no F32 scales '" + t.name + kBlockScaleSuffix +
                "' [m] (per expert) beside it");
  const int64_t rows = std::max<int64_t>(w.experts, 1) * w.m;
  w.quant = TensorType::i8_channel;
  w.data = g.external(on_backend(t.data, t.nbytes), DType::u8, {rows, w.k});
  w.scales = g.external(on_backend(s->data, s->nbytes), DType::f32, {rows});
  return w;
}

Tensor ModelWeights::expert_biases(Graph& g, const std::string& name) {
  const GgufTensor& t = file_.tensor(name);
  if (t.type != TensorType::f32 || t.shape.size() != 2)
    throw Error("tensor '" + name + "' must be an F32 matrix [n, n_expert] of expert biases");
  return g.external(on_backend(t.data, t.nbytes), DType::f32, {t.shape[1], t.shape[0]});
}

Tensor ModelWeights::vector(Graph& g, const std::string& name) {
  const GgufTensor& t = file_.tensor(name);
  if (t.type != TensorType::f32 || t.shape.size() != 1)
    throw Error("tensor '" + name + "' must be an F32 vector");
  return g.external(on_backend(t.data, t.nbytes), DType::f32, {t.shape[0]});
}

size_t ModelWeights::file_bytes() const {
  size_t n = 0;
  for (const GgufTensor& t : file_.tensors()) n += t.nbytes;
  return n;
}

size_t ModelWeights::copied_bytes() const {
  size_t n = packed_.bytes();
  for (const auto& [host, buf] : uploaded_) n += buf.bytes();
  return n;
}

}  // namespace kiln
