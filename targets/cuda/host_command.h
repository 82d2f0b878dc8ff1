// Runs a host program (the C++ compiler for the simulator, ptxas) and
// captures what it prints, stdout and stderr together, for error messages.
#pragma once

#include <string>

namespace kiln {

// Throws kiln::Error when the command cannot be started; `status` gets
// pclose's exit status (0 on success).
std::string run_host_command(const std::string& cmd, int* status);

}  // namespace kiln
