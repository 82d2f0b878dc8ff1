// Sliding-window attention (Gemma 3's local layers, Mistral): the query at
// position p sees only the keys p - window + 1 .. p, as llama.cpp's standard
// SWA mask (a key j is masked when p - j >= window). Every attention kernel
// takes `window` as a runtime i32 scalar after its others, 0 meaning full
// causal attention, so one compiled kernel serves a model's local and
// global layers alike.
#pragma once

#include "ir/builder.h"

namespace kiln {

// The first key the query at `pos` sees (i32 scalars or vectors alike).
Value window_begin(const Value& pos, const Value& window);

// Throws kiln::Error naming `kernel` when window is negative.
void check_window(const std::string& kernel, int64_t window);

}  // namespace kiln
