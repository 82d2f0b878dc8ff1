// The sampler's softmax in one kernel: y = softmax(x / temperature) over
// the k largest logits of each row, 0 elsewhere. The k-th largest value is
// found by k passes over the row, each taking the next distinct value below
// the last and counting its copies; every logit equal to the k-th largest is
// kept (ties with it are not broken). k <= 0 or k >= n keeps the whole row.
#pragma once

#include <kiln/kiln.h>

const kiln::KernelDef& softmax_topk_def();
