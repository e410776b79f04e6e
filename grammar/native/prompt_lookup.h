// Prompt-lookup drafting (the n-gram proposer of transformers' ``prompt_lookup_num_tokens``
// and vLLM's ``ngram`` speculator) over a growing token sequence: the tokens that followed
// the earliest earlier occurrence of the longest suffix n-gram. Appending a token indexes
// the n-grams ending at it (at most ``max_ngram`` probes); a draft is one lookup per n.
#pragma once

#include <cstdint>
#include <vector>

#include "ngram_index.h"

namespace cad::drafting {

class PromptLookup {
  public:
    explicit PromptLookup(int32_t max_ngram);

    void extend(const int32_t* tokens, size_t count);
    // Up to ``count`` drafted tokens after the sequence (none without an earlier match).
    void draft(int32_t count, std::vector<int32_t>& out) const;
    size_t size() const { return sequence_.size(); }

  private:
    int32_t max_ngram_;
    std::vector<int32_t> sequence_;
    NgramChains first_;
};

}  // namespace cad::drafting
