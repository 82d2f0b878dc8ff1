#include "kernels/row_block.h"

namespace kiln {

void split_row_block(KernelBuilder& k, const TargetDesc& target, const Value& row0, int64_t block_m,
                     const Value& m, const std::function<void(bool masked)>& pass) {
  if (target.warp_size > 1) {
    pass(true);
    return;
  }
  k.if_(
      row0 + static_cast<int>(block_m) <= m, [&] { pass(false); }, [&] { pass(true); });
}

void store_rows(const Pointer& p, const Value& v, const Value& rows, const Value& m, bool masked) {
  if (masked)
    store(p, v, rows < m);
  else
    store(p, v);
}

}  // namespace kiln
