// The architectures Kiln runs, one builder each (a file of this folder), and
// the table that maps GGUF's general.architecture to them.
#pragma once

#include "models/layers.h"

namespace kiln {

// llama, qwen2, qwen3, qwen3moe: pre-norm blocks, SwiGLU FFN or experts.
Tensor build_llama(Forward& f);
// gemma3: scaled embeddings, pre- and post-norms, GeGLU FFN.
Tensor build_gemma3(Forward& f);
// gpt-oss: biased attention with sinks, routed experts with biases.
Tensor build_gpt_oss(Forward& f);

}  // namespace kiln
