// Constrained decoding: a grammar compiled against a vocabulary, and the
// per-sequence matcher that tells the sampler which tokens may come next.
//
// Why an adaptive mask cache (XGrammar's design) rather than a lexer/parser
// split (llguidance's): GBNF has no separate lexer level to split off, and
// the JSON schemas Kiln translates compile to ordinary GBNF. Walking the
// whole vocabulary trie through the parse stacks at every step costs tens
// of milliseconds inside a string, where nearly every token fits. But
// almost all of that work depends only on the position at the top of a
// stack, not on what lies below it. So compile() walks the trie once per
// grammar position with the stack below left unknown and sorts each token:
// accepted whatever is below (it ends inside the rules the position
// statically belongs to), rejected whatever is below, or uncertain (it runs
// past the end of a rule that can return to several places, and a
// speculative walk through all of those places does not rule it out).
// Statically known returns are followed during the walk
// (models/grammar/byte_grammar.h copies small shared rules to make them
// so), which keeps the uncertain sets to tokens such as `",` that close a
// string and go on. At run time fill_mask ORs the cached sets of the
// current stacks' tops and checks only the uncertain tokens' remaining
// bytes against the real stacks, as a small trie. Within a counted
// repetition (a string's maxLength) the walk keeps the count symbolic and
// files each token under the passes it needs; the real count in the stack
// then selects them, so x{0,1000} costs one walk, not a thousand.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "models/grammar/byte_grammar.h"
#include "models/grammar/grammar.h"
#include "models/grammar/parse_stacks.h"
#include "models/grammar/token_trie.h"

namespace kiln {

class CompiledGrammar {
 public:
  // Throws kiln::Error for a grammar the matcher cannot run (see
  // Grammar::check) or one too large for it.
  static std::shared_ptr<const CompiledGrammar> compile(
      const Grammar& g, std::shared_ptr<const TokenVocabulary> vocab);

  const TokenVocabulary& vocab() const { return *vocab_; }
  const ByteGrammar& byte_grammar() const { return bytes_; }

  struct Stats {
    size_t positions = 0;         // byte positions (cache entries)
    size_t accepted_bitsets = 0;  // entries stored as a vocabulary-wide bitset
    size_t uncertain = 0;         // (position, token tail) pairs checked at run time
    size_t walk_states = 0;       // distinct stack sets the compile-time walk met
  };
  const Stats& stats() const { return stats_; }

 private:
  friend class GrammarMatcher;
  friend class MaskCacheBuilder;
  friend struct MaskShard;
  struct Check {          // uncertain tokens of a position: a trie of their tails
    uint32_t depth;       // frames the real stack pops before the tails apply
    uint32_t add;         // passes added to that frame's count (a counted repeat)
    uint32_t begin, end;  // nodes in check_nodes_
  };
  struct Entry {
    uint32_t bitset;                    // index into bitsets_ (words_ words each), or kNone
    uint32_t list_begin, list_end;      // else accepted tokens in lists_
    uint32_t checks_begin, checks_end;  // into checks_
    // Tokens accepted when the counted repeat `symbolic_pops` frames below
    // leaves room for their passes: cond_tokens_[cond_begin, cond_end),
    // fewest passes (cond_passes_) first; cond_bitset holds them all.
    uint32_t cond_begin, cond_end, cond_bitset;
    uint32_t symbolic_pops, symbolic_max;
  };
  static constexpr uint32_t kNone = 0xFFFFFFFF;

  CompiledGrammar() = default;
  void build_masks();  // the cache, walked by several threads

  std::shared_ptr<const TokenVocabulary> vocab_;
  ByteGrammar bytes_;
  size_t words_ = 0;                // 32-bit words of a token mask
  std::vector<uint32_t> entry_of_;  // per position: index into entries_ (byte positions)
  std::vector<Entry> entries_;
  std::vector<int32_t> lists_;
  std::vector<uint32_t> bitsets_;
  std::vector<Check> checks_;
  std::vector<TrieNode> check_nodes_;
  std::vector<int32_t> check_tokens_;
  std::vector<uint16_t> cond_passes_;
  std::vector<int32_t> cond_tokens_;
  Stats stats_;
};

// One sequence's parse. Copies are independent (fork() for n > 1 choices);
// a matcher is used by one thread at a time, many may share a grammar.
// fill_mask, accept and accept_bytes throw kiln::Error only for a grammar
// so ambiguous that over ParseStacks::kMaxStacks parses stay alive at once.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> g);

  // The tokens allowed next as a bitmask: bit t of (*mask)[t / 32] is set
  // when token t is allowed. Resized to cover the vocabulary. An end token
  // is allowed exactly when can_end(); control tokens never are.
  void fill_mask(std::vector<uint32_t>* mask);
  // Advances by a token; false (and no change) when it is not allowed.
  bool accept(int32_t token);
  // Advances by raw bytes (text forced into the output); false (no change)
  // when they do not continue the grammar.
  bool accept_bytes(std::string_view bytes);
  // An end token is allowed now: the text so far is complete.
  bool can_end() const { return !ended_ && accept_; }
  // Nothing but an end token can follow (or one has been accepted).
  bool is_done() const { return ended_ || tops_.empty(); }
  // The fewest bytes that complete the text from here (0 when it can end):
  // lets a caller steer toward an end, say as max_tokens nears.
  size_t min_bytes_to_end() const;
  // The tokens that keep to a shortest completion: each of their bytes
  // brings min_bytes_to_end() one closer (the end tokens once it is 0).
  // Taking only these, a text needing b bytes is complete within b tokens:
  // a server masks with it once no more tokens are left than bytes needed,
  // so a reply cut by max_tokens still parses. A subset of fill_mask's.
  void fill_closing_mask(std::vector<uint32_t>* mask);
  // An independent copy at the same point.
  GrammarMatcher fork() const;

  const CompiledGrammar& grammar() const { return *g_; }

 private:
  void check_tails(uint32_t top, const CompiledGrammar::Check& c, uint32_t* mask);
  size_t min_bytes(const std::vector<uint32_t>& tops, bool accept) const;
  void add_conditional(uint32_t top, const CompiledGrammar::Entry& e, uint32_t* mask);

  std::shared_ptr<const CompiledGrammar> g_;
  ParseStacks stacks_;
  std::vector<uint32_t> tops_;
  bool accept_ = false, ended_ = false;
  ParseStacks::Step next_;
  std::vector<ParseStacks::Step> levels_;  // check_tails's per-depth scratch
  std::vector<uint32_t> seen_entries_;
  std::vector<uint32_t> scratch_;
};

// Sets the logits of the tokens `mask` (fill_mask's) leaves out to -inf.
void apply_token_mask(const std::vector<uint32_t>& mask, float* logits, int64_t n_vocab);

}  // namespace kiln
