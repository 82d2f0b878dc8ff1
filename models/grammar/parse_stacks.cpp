#include "models/grammar/parse_stacks.h"

#include <algorithm>
#include <string>

#include "ir/error.h"

namespace kiln {

namespace {

uint64_t hash_node(uint32_t pos, uint32_t parent, uint32_t count) {
  uint64_t h = (uint64_t{pos} << 32 | parent) * 0x9E3779B97F4A7C15ull;
  h ^= count * 0xC2B2AE3D27D4EB4Full;
  return h ^ (h >> 29);
}

}  // namespace

uint32_t ParseStacks::intern(uint32_t pos, uint32_t parent, uint32_t count) {
  if (nodes_.size() * 2 >= table_.size()) {
    std::vector<uint32_t> bigger(std::max<size_t>(1024, table_.size() * 2), kNoParent);
    const size_t mask = bigger.size() - 1;
    for (uint32_t id = 0; id < nodes_.size(); ++id) {
      size_t h = hash_node(nodes_[id].pos, nodes_[id].parent, nodes_[id].count) & mask;
      while (bigger[h] != kNoParent) h = (h + 1) & mask;
      bigger[h] = id;
    }
    table_.swap(bigger);
  }
  const size_t mask = table_.size() - 1;
  size_t h = hash_node(pos, parent, count) & mask;
  for (;; h = (h + 1) & mask) {
    const uint32_t id = table_[h];
    if (id == kNoParent) break;
    const Node& n = nodes_[id];
    if (n.pos == pos && n.parent == parent && n.count == count) return id;
  }
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  if (id >= kBottomBase) throw Error("grammar matcher: parse stack pool exhausted");
  nodes_.push_back({pos, parent, count});
  seen_.push_back(0);
  table_[h] = id;
  return id;
}

void ParseStacks::clear() {
  nodes_.clear();
  seen_.clear();
  std::fill(table_.begin(), table_.end(), kNoParent);
  step_ = 0;
}

void ParseStacks::begin_step(Step* out) {
  out->clear();
  work_.clear();
  if (++step_ == 0) {  // the stamp wrapped: forget every old visit
    std::fill(seen_.begin(), seen_.end(), 0);
    step_ = 1;
  }
}

void ParseStacks::close(Step* out) {
  using Kind = ByteGrammar::Kind;
  const std::vector<ByteGrammar::Element>& el = g_->elements;
  while (!work_.empty()) {
    const uint32_t id = work_.back();
    work_.pop_back();
    if (seen_[id] == step_) continue;
    seen_[id] = step_;
    const Node n = nodes_[id];
    if (n.pos == kAnyPos) {
      out->tops.push_back(id);
      continue;
    }
    const ByteGrammar::Element e = el[n.pos];
    if (e.kind == Kind::bytes) {
      out->tops.push_back(id);
      if (out->tops.size() > kMaxStacks)
        throw Error("grammar is too ambiguous: over " + std::to_string(kMaxStacks) +
                    " parses are alive at once");
    } else if (e.kind == Kind::rule) {
      const uint32_t ret = el[n.pos + 1].kind == Kind::end ? n.parent : intern(n.pos + 1, n.parent);
      for (uint32_t a : g_->rules[e.arg].alternatives) work_.push_back(intern(a, ret));
    } else if (e.kind == Kind::repeat) {
      repeat(n, g_->repeats[e.arg], out);
    } else if (n.parent == kNoParent) {
      out->accept = true;
    } else if (n.parent < kBottomBase) {
      work_.push_back(n.parent);  // the parent sits at the position to continue from
    } else {                      // a bottom marker: what lies below is not known
      const uint32_t depth = n.parent - kBottomBase;
      const uint32_t ret = depth == 0 ? ByteGrammar::kManyReturns : g_->sole_return[e.arg];
      if (ret == ByteGrammar::kGrammarEnd) {
        out->accept = true;
      } else if (ret != ByteGrammar::kManyReturns && !(ret & ByteGrammar::kPass)) {
        work_.push_back(intern(ret, kBottomBase + depth + 1));
      } else if (ret != ByteGrammar::kManyReturns && depth + 1 == symbolic_depth_) {
        work_.push_back(intern(ret & ~ByteGrammar::kPass, kBottomBase + depth + 1, kSymbolic));
      } else {
        // Many places to return to, or a repeat whose count is not followed.
        if (depth > 0) out->escapes.push_back({depth, e.arg, 0});
        speculate(e.arg, out);
      }
    }
  }
  if (out->escapes.size() > 1) {
    std::sort(out->escapes.begin(), out->escapes.end());
    out->escapes.erase(std::unique(out->escapes.begin(), out->escapes.end()), out->escapes.end());
  }
}

void ParseStacks::speculate(uint32_t rule, Step* out) {
  if (g_->returns_unbounded[rule]) {
    work_.push_back(intern(kAnyPos, kSpeculative));
    return;
  }
  for (uint32_t r : g_->returns[rule]) {
    if (r == ByteGrammar::kGrammarEnd) {
      out->spec_accept = true;
    } else if (r & ByteGrammar::kPass) {
      work_.push_back(intern(r & ~ByteGrammar::kPass, kSpeculative, kAnyCount));
    } else {
      work_.push_back(intern(r, kSpeculative));
    }
  }
}

// A repeat frame: another pass through the body if the count allows it,
// and past the repetition if the count allows that.
void ParseStacks::repeat(const Node& n, const ByteGrammar::Repeat& r, Step* out) {
  const uint32_t self = n.pos, body = r.rule;
  auto pass = [&](uint32_t count) {
    const uint32_t ret = intern(self, n.parent, count);
    for (uint32_t a : g_->rules[body].alternatives) work_.push_back(intern(a, ret));
  };
  if (n.count == kAnyCount) {  // speculative: any count
    pass(kAnyCount);
    work_.push_back(intern(self + 1, n.parent));
  } else if (n.count >= kSymbolic) {
    // Count X + j of a real frame (X >= 1, unknown). Another pass needs
    // X + j + 1 <= max: possible for some X when j + 2 <= max, and the
    // frame's count then records the bound the token relies on. Leaving
    // needs min <= X + j <= max: certain only for j == 0 and min <= 1; else
    // the real count decides at run time (an escape adding j passes).
    const uint32_t j = n.count - kSymbolic;
    if (j + 2 <= r.max) pass(n.count + 1);
    if (j == 0 && r.min <= 1) {
      work_.push_back(intern(self + 1, n.parent));
    } else {
      out->escapes.push_back({n.parent - kBottomBase - 1, body, j});
      work_.push_back(intern(self + 1, kSpeculative));
    }
  } else if (n.count <= r.max) {  // more than max: passes a run-time check added
    if (n.count < r.max) pass(n.count + 1);
    if (n.count >= r.min) work_.push_back(intern(self + 1, n.parent));
  }
}

void ParseStacks::start(Step* out) {
  begin_step(out);
  for (uint32_t a : g_->rules[g_->root].alternatives) work_.push_back(intern(a, kNoParent));
  close(out);
}

void ParseStacks::advance(const std::vector<uint32_t>& tops, uint8_t byte, Step* out) {
  begin_step(out);
  for (uint32_t id : tops) {
    const Node n = nodes_[id];
    if (n.pos == kAnyPos)
      work_.push_back(id);
    else if (g_->byte_sets[g_->elements[n.pos].arg].test(byte))
      work_.push_back(intern(n.pos + 1, n.parent));
  }
  close(out);
}

void ParseStacks::expand(uint32_t id, Step* out) {
  begin_step(out);
  work_.push_back(id);
  close(out);
}

uint32_t ParseStacks::pop(uint32_t id, uint32_t frames) const {
  for (; frames > 0; --frames) {
    id = nodes_[id].parent;
    if (id >= kBottomBase) return kNoParent;
  }
  return id;
}

void ParseStacks::compact(std::vector<uint32_t>* tops) {
  std::vector<Node> old;
  old.swap(nodes_);
  seen_.clear();
  table_.clear();  // shrinks back; intern() regrows it to fit
  step_ = 0;
  std::vector<uint32_t> remap(old.size(), kNoParent);
  std::vector<uint32_t> chain;
  for (uint32_t& top : *tops) {
    // Frames from the top down to the first already copied, then copied bottom up.
    chain.clear();
    for (uint32_t id = top; id < kBottomBase && remap[id] == kNoParent; id = old[id].parent)
      chain.push_back(id);
    for (size_t i = chain.size(); i-- > 0;) {
      const uint32_t p = old[chain[i]].parent;
      remap[chain[i]] =
          intern(old[chain[i]].pos, p < kBottomBase ? remap[p] : p, old[chain[i]].count);
    }
    top = remap[top];
  }
}

}  // namespace kiln
