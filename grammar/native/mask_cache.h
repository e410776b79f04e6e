// Adaptive token-mask caches: per parser state, the vocabulary split into accepted, rejected
// and undecided tokens once, so that a mask at run time copies the accepted part and walks
// only the undecided few (XGrammar's adaptive token mask cache, keyed here on an engine's
// context-independent local state).
//
// A state's mask is computed by walking the token trie from the state's *local* view (the
// DPDA's stack suffix over an unknown rest; Earley's newest sets with older origins unknown).
// A byte the local view cannot judge (it would pop or complete into the unknown part) makes
// the whole subtree under it undecided: the cache keeps the trie node and the local
// configuration it was reached from, and the fill resumes the walk there with the real
// context. Walks through regions that recur across grammars (strings, free text) come from
// the vocabulary's RegionCache.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "bitmask.h"
#include "region_cache.h"
#include "token_trie.h"
#include "trie_walk.h"

namespace cad {

struct StateMask {
    struct Undecided {
        uint32_t node;   // the trie node whose byte the local view could not judge
        int32_t config;  // the local configuration of its parent
    };
    TokenList accepted;
    std::vector<Undecided> undecided;
    const TokenTrie* undecided_trie = nullptr;  // whose nodes ``undecided`` names (the walked one)
    size_t undecided_tokens = 0;                // tokens under the undecided subtrees
    std::vector<int32_t> contexts;  // what an engine needs to rebuild undecided configs

    void write(uint32_t* row, size_t words) const { accepted.write(row, words); }
};

// Walks the trie from local configurations with a memoised ``Step`` (an object with
// ``int32_t operator()(int32_t config, uint8_t byte)``) and collects a StateMask.
template <class Step>
class MaskBuilder {
  public:
    MaskBuilder(const TokenTrie& trie, Step& step)
        : trie_(&trie), step_(step), words_(bitmask_words(trie.vocab_size())) {
        mask_.undecided_trie = &trie;
    }

    // Judge every token below ``node`` from ``config`` (the configuration at ``node``).
    void walk(uint32_t node, int32_t config) { walk_subtree(*trie_, node, config, *this, frames_); }
    // Walk ``other`` (a trie over the same vocabulary) from its root instead: the undecided
    // entries then name its nodes.
    void walk_other(const TokenTrie& other, int32_t config) {
        trie_ = &other;
        mask_.undecided_trie = &other;
        walk(0, config);
    }
    // The tokens that end at ``node`` are accepted.
    void take(uint32_t node) {
        for (const int32_t* id = trie_->tokens_begin(node); id != trie_->tokens_end(node); ++id) {
            add(*id);
        }
    }
    void take(const TokenList& tokens) {
        if (tokens.bits.empty()) {
            for (int32_t token : tokens.ids) add(token);
            return;
        }
        use_row();
        for (size_t word = 0; word < words_; ++word) {
            count_ += static_cast<size_t>(__builtin_popcount(tokens.bits[word] & ~row_[word]));
            row_[word] |= tokens.bits[word];
        }
    }
    StateMask finish() {
        if (row_.empty()) {
            mask_.accepted.ids = std::move(ids_);  // ids are distinct: every node is taken once
        } else {
            mask_.accepted = TokenList::from_row(std::move(row_), count_);
        }
        return std::move(mask_);
    }

    int32_t step(int32_t config, uint8_t byte) { return step_(config, byte); }
    bool descend(int32_t) const { return true; }
    void accept(uint32_t node, int32_t) { take(node); }
    void dependent(uint32_t node, int32_t config) {
        mask_.undecided.push_back({node, config});
        mask_.undecided_tokens += trie_->subtree_tokens(node);
    }
    size_t mark() const { return 0; }
    void release(size_t) {}

  private:
    // Accepted tokens are collected as ids until there are enough of them for a row to be
    // the cheaper form.
    void add(int32_t token) {
        if (row_.empty()) {
            ids_.push_back(token);
            if (ids_.size() * 8 <= words_) return;
            use_row();
            return;
        }
        uint32_t& word = row_[static_cast<uint32_t>(token) >> 5];
        const uint32_t bit = 1u << (static_cast<uint32_t>(token) & 31);
        count_ += (word & bit) ? 0 : 1;
        word |= bit;
    }
    void use_row() {
        if (!row_.empty()) return;
        row_.assign(words_, 0u);
        for (int32_t token : ids_) set_token(row_.data(), token);
        count_ = ids_.size();
        ids_.clear();
    }

    const TokenTrie* trie_;
    Step& step_;
    StateMask mask_;
    size_t words_;
    std::vector<int32_t> ids_;
    std::vector<uint32_t> row_;
    size_t count_ = 0;
    WalkScratch frames_;
};

// Sets the bits of the tokens a full-context walk reaches; ``Step`` as for MaskBuilder plus
// ``size_t mark()`` / ``void release(size_t)`` for the scratch its configurations use.
template <class Step>
class RowWalker {
  public:
    RowWalker(const TokenTrie& trie, Step& step, uint32_t* row, WalkScratch& frames)
        : trie_(trie), step_(step), row_(row), frames_(frames) {}

    // Judge the undecided subtree of ``node`` from ``parent_config`` (its parent's real
    // configuration).
    void resolve(uint32_t node, int32_t parent_config, uint8_t byte) {
        const size_t before = step_.mark();
        const int32_t config = step_(parent_config, byte);
        if (config >= 0) {
            accept(node, config);
            walk_subtree(trie_, node, config, *this, frames_);
        }
        step_.release(before);
    }

    int32_t step(int32_t config, uint8_t byte) {
        const int32_t next = step_(config, byte);
        return next == kDependent ? kDead : next;
    }
    bool descend(int32_t) const { return true; }
    void accept(uint32_t node, int32_t) {
        for (const int32_t* id = trie_.tokens_begin(node); id != trie_.tokens_end(node); ++id) {
            set_token(row_, *id);
        }
    }
    void dependent(uint32_t, int32_t) {}
    size_t mark() const { return step_.mark(); }
    void release(size_t mark) { step_.release(mark); }

  private:
    const TokenTrie& trie_;
    Step& step_;
    uint32_t* row_;
    WalkScratch& frames_;
};

// A region of a local automaton around a root configuration: the configurations reachable
// from the root without passing a configuration that could look below the local view (those
// are the exits). ``key`` is its transition table in canonical (breadth-first) numbering:
// what makes two regions, of any grammars, walk the trie alike.
struct Region {
    std::vector<int32_t> configs;  // region configurations, root first
    std::vector<int32_t> exits;    // exit configurations
    std::vector<int32_t> key;
};

constexpr size_t kMaxRegion = 64;

// Explore the region around ``root``; false if the root itself is an exit or the region (or
// its exits) outgrow kMaxRegion.
template <class Step>
bool explore_region(Step& step, int32_t root, Region& region) {
    std::vector<int32_t> row(256);
    std::vector<int32_t> order{root};  // every live configuration seen, in discovery order
    std::unordered_map<int32_t, int32_t> seen{{root, 0}};
    std::vector<std::vector<int32_t>> rows;
    std::vector<bool> is_exit;
    auto index_of = [&seen](int32_t config) { return seen.at(config); };
    for (size_t next = 0; next < order.size(); ++next) {
        bool exit = false;
        for (int byte = 0; byte < 256; ++byte) {
            row[byte] = step(order[next], static_cast<uint8_t>(byte));
            exit = exit || row[byte] == kDependent;
        }
        if (exit && next == 0) return false;
        is_exit.push_back(exit);
        rows.push_back(row);
        if (exit) continue;
        for (int32_t target : row) {
            if (target >= 0 && seen.emplace(target, static_cast<int32_t>(order.size())).second) {
                if (order.size() >= 2 * kMaxRegion) return false;
                order.push_back(target);
            }
        }
    }
    // Canonical numbering: region configurations and exits each in discovery order.
    std::vector<int32_t> number(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
        std::vector<int32_t>& target = is_exit[i] ? region.exits : region.configs;
        number[i] = static_cast<int32_t>(target.size());
        target.push_back(order[i]);
    }
    if (region.configs.size() > kMaxRegion || region.exits.size() > kMaxRegion) return false;
    region.key.push_back(static_cast<int32_t>(region.configs.size()));
    for (size_t i = 0; i < order.size(); ++i) {
        if (is_exit[i]) continue;
        for (int32_t target : rows[i]) {
            if (target < 0) {
                region.key.push_back(target);
                continue;
            }
            const size_t j = static_cast<size_t>(index_of(target));
            region.key.push_back(is_exit[j] ? -100 - number[j] : number[j]);
        }
    }
    return true;
}

// The walk of ``region`` from its root: the tokens that stay inside and the exits.
template <class Step>
RegionMask walk_region(const TokenTrie& trie, Step& step, const Region& region) {
    struct Walker {
        const TokenTrie& trie;
        Step& step_;
        std::unordered_map<int32_t, int32_t> exit_of;  // exit configuration -> exit index
        RegionMask mask;
        std::vector<uint32_t> row;
        size_t count = 0;
        int32_t step(int32_t config, uint8_t byte) { return step_(config, byte); }
        bool descend(int32_t config) const { return exit_of.count(config) == 0; }
        void accept(uint32_t node, int32_t config) {
            const auto exit = exit_of.find(config);
            if (exit != exit_of.end()) {
                mask.exits.push_back({node, exit->second});
                return;
            }
            for (const int32_t* id = trie.tokens_begin(node); id != trie.tokens_end(node); ++id) {
                uint32_t& word = row[static_cast<uint32_t>(*id) >> 5];
                const uint32_t bit = 1u << (static_cast<uint32_t>(*id) & 31);
                count += (word & bit) ? 0 : 1;
                word |= bit;
            }
        }
        void dependent(uint32_t, int32_t) {}
        size_t mark() const { return 0; }
        void release(size_t) {}
    } walker{trie, step, {}, {}, std::vector<uint32_t>(bitmask_words(trie.vocab_size()), 0u)};
    for (size_t exit = 0; exit < region.exits.size(); ++exit) {
        walker.exit_of.emplace(region.exits[exit], static_cast<int32_t>(exit));
    }
    WalkScratch frames;
    walk_subtree(trie, 0, region.configs[0], walker, frames);
    walker.mask.inside = TokenList::from_row(std::move(walker.row), walker.count);
    return std::move(walker.mask);
}

// Tokens by the outcome of their first byte from ``root``: how many the walk would judge at
// all (a cost estimate) and how many the local view cannot judge from their first byte on.
struct FirstByteCount {
    size_t reachable = 0;
    size_t dependent = 0;
};

template <class Step>
FirstByteCount count_first_bytes(const TokenTrie& trie, Step& step, int32_t root) {
    FirstByteCount count;
    for_each_child(trie, 0, [&](uint32_t child) {
        const int32_t next = step(root, trie.byte(child));
        if (next == kDead) return;
        const size_t tokens = trie.subtree_tokens(child);
        count.reachable += tokens;
        if (next == kDependent) count.dependent += tokens;
    });
    return count;
}

constexpr size_t kRegionAbove = 16384;  // walks judging more tokens try the caches below
constexpr size_t kSliceBudget = 4096;   // product pairs explored before giving up

// Whether every token of the string slice is accepted from ``root`` with nothing undecided:
// explored on the product of the slice automaton and the local automaton.
template <class Step>
bool accepts_string_slice(Step& step, int32_t root) {
    std::vector<std::pair<int, int32_t>> agenda{{0, root}};
    std::unordered_map<uint64_t, bool> seen{{static_cast<uint32_t>(root), true}};
    while (!agenda.empty()) {
        const auto [state, config] = agenda.back();
        agenda.pop_back();
        for (int byte = 0; byte < 256; ++byte) {
            const int next_state = TokenSlice::step(state, static_cast<uint8_t>(byte));
            if (next_state < 0) continue;
            const int32_t next = step(config, static_cast<uint8_t>(byte));
            if (next < 0) return false;
            const uint64_t key = (static_cast<uint64_t>(next_state) << 32) | static_cast<uint32_t>(next);
            if (seen.emplace(key, true).second) {
                if (seen.size() > kSliceBudget) return false;
                agenda.emplace_back(next_state, next);
            }
        }
    }
    return true;
}

// The mask of the local view rooted at ``root`` (``count`` its first bytes): for a walk that
// would be large, the string slice when the root accepts all of it, else the region cache
// when the root's region is small; otherwise (and for what those leave) by walking the trie.
template <class Step>
StateMask build_state_mask(const TokenTrie& trie, Step& step, int32_t root,
                           const FirstByteCount& count) {
    MaskBuilder<Step> builder(trie, step);
    const bool large = count.reachable > kRegionAbove;
    if (large && accepts_string_slice(step, root)) {
        const TokenSlice& slice = trie.string_slice();
        builder.take(slice.tokens);
        builder.walk_other(*slice.rest, root);
        return builder.finish();
    }
    Region region;
    if (large && explore_region(step, root, region)) {
        std::shared_ptr<const RegionMask> cached = trie.regions().find(region.key);
        if (!cached) cached = trie.regions().insert(region.key, walk_region(trie, step, region));
        builder.take(cached->inside);
        for (const RegionMask::Exit& exit : cached->exits) {
            builder.take(exit.node);
            builder.walk(exit.node, region.exits[exit.exit]);
        }
    } else {
        builder.walk(0, root);
    }
    return builder.finish();
}

}  // namespace cad
