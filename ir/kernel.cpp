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

}  // namespace kiln
