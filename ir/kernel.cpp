#include "ir/kernel.h"

namespace kiln {

namespace {
int count_kind(const Kernel& k, ParamKind kind, int upto) {
  int n = 0;
  for (int i = 0; i < upto; ++i) n += k.params[i].kind == kind;
  return n;
}
}  // namespace

int Kernel::num_buffers() const {
  return count_kind(*this, ParamKind::Buffer, static_cast<int>(params.size()));
}
int Kernel::num_scalars() const {
  return count_kind(*this, ParamKind::Scalar, static_cast<int>(params.size()));
}
int buffer_slot(const Kernel& k, int param_index) {
  return count_kind(k, ParamKind::Buffer, param_index);
}
int scalar_slot(const Kernel& k, int param_index) {
  return count_kind(k, ParamKind::Scalar, param_index);
}

const std::string* memory_name(const Kernel& k, int64_t ival) {
  if (is_scratch_ref(ival)) {
    size_t s = static_cast<size_t>(scratch_index(ival));
    return s < k.scratch.size() ? &k.scratch[s].name : nullptr;
  }
  return static_cast<size_t>(ival) < k.params.size() ? &k.params[ival].name : nullptr;
}

DType memory_dtype(const Kernel& k, int64_t ival) {
  return is_scratch_ref(ival) ? k.scratch.at(scratch_index(ival)).dtype : k.params.at(ival).dtype;
}

}  // namespace kiln
