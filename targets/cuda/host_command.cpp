#include "targets/cuda/host_command.h"

#include <cstdio>

#include "ir/error.h"

namespace kiln {

std::string run_host_command(const std::string& cmd, int* status) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw Error("cannot run '" + cmd + "'");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

}  // namespace kiln
