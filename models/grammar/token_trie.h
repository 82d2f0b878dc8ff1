// A model's vocabulary as the grammar matcher sees it: each token's bytes,
// the tokens that end a generation, and a byte trie of all the others.
//
// Building it costs a pass over the vocabulary (tens of milliseconds for
// 150k tokens), and it depends on the model only, so a server builds one per
// model and shares it, read-only, among every grammar it compiles
// (models/grammar/matcher.h). The trie is stored flat in depth-first order:
// a node's subtree is the index range up to its `end`, so a walk that finds
// a prefix impossible skips every token below it in one step, and the
// tokens a node spells are a contiguous run of the trie-ordered token list.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Tokenizer;

// Tries stored as TokenVocabulary stores its own: the vocabulary's, and the
// small ones the mask cache keeps of the token tails it must check at run
// time.
struct TrieNode {
  uint32_t end;           // first node after this one's subtree
  uint32_t tokens_begin;  // this node's tokens start here in the token list
  uint16_t depth;         // bytes from the root (the root itself is not stored)
  uint8_t byte;           // the byte that leads here from the parent
};
// Appends the trie of (bytes, token) entries, sorted by bytes (unsigned
// order; equal bytes may repeat), to *nodes and their tokens to *tokens.
// Entries longer than 65535 bytes are left out.
void append_trie(const std::vector<std::pair<std::string_view, int32_t>>& sorted,
                 std::vector<TrieNode>* nodes, std::vector<int32_t>* tokens);

class TokenVocabulary {
 public:
  using Node = TrieNode;

  // pieces[id]: the bytes of token id; "" for a token never allowed (a
  // control token). end_tokens: allowed exactly when the grammar can end
  // (their pieces are ignored).
  TokenVocabulary(const std::vector<std::string>& pieces, std::vector<int32_t> end_tokens);
  // The tokenizer's pieces (control tokens are "") with its end-of-generation
  // tokens (EOS, end of turn: Vocab::eog) as the end tokens unless
  // `end_tokens` names others.
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(
      const Tokenizer& tok, std::vector<int32_t> end_tokens = {});

  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  std::string_view piece(int32_t id) const {
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  bool is_end(int32_t id) const;

  // The trie (without its root): nodes in depth-first order, children by byte.
  const std::vector<Node>& nodes() const { return nodes_; }
  // Token ids in trie order; node i spells token_ids()[nodes()[i].tokens_begin,
  // nodes()[i + 1].tokens_begin) (the last node up to token_ids().size()).
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  uint32_t tokens_end(uint32_t node) const {
    return node + 1 < nodes_.size() ? nodes_[node + 1].tokens_begin
                                    : static_cast<uint32_t>(token_ids_.size());
  }
  size_t max_piece_length() const { return max_length_; }

 private:
  std::string bytes_;
  std::vector<uint32_t> offsets_;
  std::vector<int32_t> end_tokens_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  size_t max_length_ = 0;
};

}  // namespace kiln
