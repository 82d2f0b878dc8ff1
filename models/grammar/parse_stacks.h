// The pushdown machinery both halves of the matcher share: parse stacks
// over a ByteGrammar, stepped one byte at a time.
//
// A stack is a chain of frames, each a position in the grammar; the top
// frame is always at a byte set, the ones below at the positions to return
// to. Frames are hash-consed into a pool (a frame is its position, its
// parent's id and, at a counted repeat, its count), so equal stacks are
// equal ids: a set of stacks is a list of
// top ids with no duplicates, advancing a stack allocates only its new top
// frames, and the sets that ambiguous grammars build stay small. A
// reference in the last slot of an alternative pushes no return frame (the
// caller would only end too), so repetitions written as right recursion
// keep the stacks shallow.
//
// The mask cache (matcher.cpp) walks from a single position whose stack
// below is unknown: its bottom frame's parent is a "bottom" marker that
// counts how many real frames lie above it. When a rule ends onto that
// marker and the ByteGrammar knows its one return position, the walk
// carries on there; when the rule could return to several places, the step
// records an escape (the depth in frames, the rule) for the run-time check
// and carries on speculatively at all of those places at once: a token no
// speculative frame survives is rejected whatever the real stack holds. The
// first counted repeat on the way down keeps a symbolic count, so a walk
// through a string's maxLength loop is one walk for every count.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "models/grammar/byte_grammar.h"

namespace kiln {

class ParseStacks {
 public:
  static constexpr uint32_t kNoParent = 0xFFFFFFFF;  // the bottom of a real stack
  // kBottomBase + d: an unknown stack below d real frames.
  static constexpr uint32_t kBottomBase = 0xFFF00000;
  // kBottomBase + 0: below a speculative frame, one of the places a rule
  // with many returns might have returned to.
  static constexpr uint32_t kSpeculative = kBottomBase;
  // The position of a speculative frame that takes every byte (for a rule
  // returning to too many places to list).
  static constexpr uint32_t kAnyPos = 0xFFFFFFFF;
  // Ambiguity that grows the stack set past this is refused rather than slow.
  static constexpr size_t kMaxStacks = 1 << 14;

  // A frame at a repeat element counts the passes through its body,
  // including the one under way. In the compile-time walk the count of the
  // repeat frame at the symbolic depth (set_symbolic_depth) is unknown:
  // kSymbolic + j stands for that count plus j; a speculative repeat frame
  // has kAnyCount.
  static constexpr uint32_t kSymbolic = 0x80000000;
  static constexpr uint32_t kAnyCount = 0xFFFFFFFF;

  struct Node {
    uint32_t pos, parent, count;
  };
  // The real stack with its top `depth` frames popped (and `add` passes
  // added to the count of the repeat frame then on top) must take the rest
  // of the token.
  struct Escape {
    uint32_t depth, rule, add;
    bool operator==(const Escape&) const = default;
    bool operator<(const Escape& o) const {
      if (depth != o.depth) return depth < o.depth;
      return add != o.add ? add < o.add : rule < o.rule;
    }
  };
  // Where a step leaves the parse: stacks whose tops are at byte sets
  // (speculative ones among them), whether the input may end here (for
  // certain, or speculatively), and the escapes past a bottom marker.
  struct Step {
    std::vector<uint32_t> tops;
    bool accept = false, spec_accept = false;
    std::vector<Escape> escapes;
    void clear() {
      tops.clear();
      accept = spec_accept = false;
      escapes.clear();
    }
  };

  explicit ParseStacks(const ByteGrammar* g) : g_(g) {}

  uint32_t intern(uint32_t pos, uint32_t parent, uint32_t count = 0);
  const Node& node(uint32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  void clear();

  // The stacks at the start of the input.
  void start(Step* out);
  // Every stack in `tops` whose byte set holds `byte`, one byte further.
  void advance(const std::vector<uint32_t>& tops, uint8_t byte, Step* out);
  // The stacks reached from frame `id` (any position: a return position
  // too) before the next byte.
  void expand(uint32_t id, Step* out);
  // The frame `frames` below `id`; kNoParent when the stack is not that deep.
  uint32_t pop(uint32_t id, uint32_t frames) const;
  // Rebuilds the pool with only the frames under `tops` (renumbered in place).
  void compact(std::vector<uint32_t>* tops);
  // The compile-time walk's one repeat frame whose count stays symbolic:
  // the real frame `depth` from the top (0: none).
  void set_symbolic_depth(uint32_t depth) { symbolic_depth_ = depth; }

 private:
  void begin_step(Step* out);
  void close(Step* out);  // expands the frames queued in work_
  void repeat(const Node& n, const ByteGrammar::Repeat& r, Step* out);
  void speculate(uint32_t rule, Step* out);  // queues where `rule` returns, speculatively

  const ByteGrammar* g_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> table_;  // open addressing over node ids; kNoParent = empty
  std::vector<uint32_t> seen_;   // per node: the step that last visited it
  uint32_t step_ = 0;
  std::vector<uint32_t> work_;
  uint32_t symbolic_depth_ = 0;
};

}  // namespace kiln
