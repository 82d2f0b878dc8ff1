#include "models/grammar/token_trie.h"

#include <algorithm>

#include "ir/error.h"
#include "models/tokenizer.h"

namespace kiln {

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& pieces,
                                 std::vector<int32_t> end_tokens)
    : end_tokens_(std::move(end_tokens)) {
  const int32_t n = static_cast<int32_t>(pieces.size());
  offsets_.reserve(pieces.size() + 1);
  offsets_.push_back(0);
  for (const std::string& p : pieces) {
    bytes_ += p;
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  std::sort(end_tokens_.begin(), end_tokens_.end());
  end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
  for (int32_t t : end_tokens_)
    if (t < 0 || t >= n)
      throw Error("end token " + std::to_string(t) + " is outside the vocabulary of " +
                  std::to_string(n) + " tokens");
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n; ++id)
    if (!piece(id).empty() && !is_end(id)) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return piece(a) < piece(b); });
  std::vector<std::pair<std::string_view, int32_t>> sorted;
  sorted.reserve(ids.size());
  for (int32_t id : ids) {
    sorted.push_back({piece(id), id});
    if (piece(id).size() <= 0xFFFF) max_length_ = std::max(max_length_, piece(id).size());
  }
  append_trie(sorted, &nodes_, &token_ids_);
}

void append_trie(const std::vector<std::pair<std::string_view, int32_t>>& sorted,
                 std::vector<TrieNode>* nodes, std::vector<int32_t>* tokens) {
  // Sorted order is depth-first order: each entry adds the nodes past the
  // prefix it shares with the one before, and closes the nodes it leaves.
  std::vector<uint32_t> open;  // node index per depth - 1 along the current path
  std::string_view prev;
  for (const auto& [p, id] : sorted) {
    if (p.size() > 0xFFFF) continue;  // depth is 16 bits; real pieces are far shorter
    size_t common = 0;
    while (common < prev.size() && common < p.size() && prev[common] == p[common]) ++common;
    for (size_t d = open.size(); d > common; --d)
      (*nodes)[open[d - 1]].end = static_cast<uint32_t>(nodes->size());
    open.resize(common);
    for (size_t d = common; d < p.size(); ++d) {
      open.push_back(static_cast<uint32_t>(nodes->size()));
      nodes->push_back({0, static_cast<uint32_t>(tokens->size()), static_cast<uint16_t>(d + 1),
                        static_cast<uint8_t>(p[d])});
    }
    tokens->push_back(id);
    prev = p;
  }
  for (uint32_t i : open) (*nodes)[i].end = static_cast<uint32_t>(nodes->size());
}

bool TokenVocabulary::is_end(int32_t id) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), id);
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(
    const Tokenizer& tok, std::vector<int32_t> end_tokens) {
  std::vector<std::string> pieces(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) pieces[id] = tok.token_to_piece(id);
  if (end_tokens.empty()) end_tokens = tok.vocab().eog;
  return std::make_shared<const TokenVocabulary>(pieces, std::move(end_tokens));
}

}  // namespace kiln
