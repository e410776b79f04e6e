// Masks of token-trie walks through "regions" of a parser's local automaton, shared by every
// grammar over one vocabulary.
//
// The expensive first walks are those from states that accept most of the vocabulary: inside
// a string, a pattern, free text. The part of the local automaton such a walk spends its time
// in (the string's characters, escapes and UTF-8 continuation states) is the same in every
// grammar that has that kind of string, and its follow-set-specific exits (the closing quote
// and what may come after it) are few. So the walk through a region is cached per vocabulary
// under the region's canonical transition table: the tokens that stay inside it, and the trie
// nodes where a token leaves it (with the exit taken). A grammar's first visit to such a state
// then copies the region's tokens and walks only from those exits.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "bitmask.h"
#include "fnv1a.h"

namespace cad {

struct RegionMask {
    struct Exit {
        uint32_t node;  // the trie node whose byte leaves the region
        int32_t exit;   // which exit configuration it reaches (canonical order)
    };
    TokenList inside;  // tokens whose bytes stay in the region
    std::vector<Exit> exits;
};

class RegionCache {
  public:
    std::shared_ptr<const RegionMask> find(const std::vector<int32_t>& key) const {
        std::lock_guard<std::mutex> guard(lock_);
        auto found = masks_.find(key);
        return found == masks_.end() ? nullptr : found->second;
    }
    // Store ``mask`` unless another thread stored one first; returns the stored one.
    std::shared_ptr<const RegionMask> insert(std::vector<int32_t> key, RegionMask mask) {
        std::lock_guard<std::mutex> guard(lock_);
        auto [found, inserted] =
            masks_.emplace(std::move(key), std::make_shared<const RegionMask>(std::move(mask)));
        return found->second;
    }

  private:
    struct KeyHash {
        size_t operator()(const std::vector<int32_t>& key) const {
            uint64_t digest = fnv1a::kOffsetBasis;
            for (int32_t value : key) digest = fnv1a::symbol(digest, static_cast<uint32_t>(value));
            return static_cast<size_t>(digest);
        }
    };
    mutable std::mutex lock_;
    std::unordered_map<std::vector<int32_t>, std::shared_ptr<const RegionMask>, KeyHash> masks_;
};

}  // namespace cad
