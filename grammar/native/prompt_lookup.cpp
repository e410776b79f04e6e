#include "prompt_lookup.h"

#include <algorithm>
#include <stdexcept>

namespace cad::drafting {

PromptLookup::PromptLookup(int32_t max_ngram) : max_ngram_(max_ngram) {
    if (max_ngram < 1 || max_ngram > kMaxNgram) {
        throw std::invalid_argument("prompt lookup takes n-grams of 1 to 4 tokens");
    }
}

void PromptLookup::extend(const int32_t* tokens, size_t count) {
    for (size_t i = 0; i < count; ++i) {
        sequence_.push_back(tokens[i]);
        const int32_t end = static_cast<int32_t>(sequence_.size());
        for (int32_t n = 1; n <= std::min(max_ngram_, end); ++n) {
            first_.add(NgramKey::of(sequence_.data() + end - n, n), end - n);
        }
    }
}

void PromptLookup::draft(int32_t count, std::vector<int32_t>& out) const {
    out.clear();
    const int32_t length = static_cast<int32_t>(sequence_.size());
    for (int32_t n = std::min(max_ngram_, length); n >= 1; --n) {
        const int32_t start = first_.oldest(NgramKey::of(sequence_.data() + length - n, n));
        if (start == NgramChains::kNone || start + n >= length) continue;
        const int32_t follow = start + n;
        const int32_t stop = std::min(follow + count, length);
        out.assign(sequence_.begin() + follow, sequence_.begin() + stop);
        return;
    }
}

}  // namespace cad::drafting
