#include "support/test_data.h"

#include <algorithm>
#include <cmath>

namespace kiln::test {

double worst_error(const HostBuffer& a, const std::vector<double>& ref, double atol, double rtol) {
  double worst = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    double d = std::fabs(a.get(i) - ref[i]);
    if (std::isnan(a.get(i)) != std::isnan(ref[i])) return INFINITY;
    if (std::isnan(d)) continue;
    worst = std::max(worst, d / (atol + rtol * std::fabs(ref[i])));
  }
  return worst;
}

}  // namespace kiln::test
