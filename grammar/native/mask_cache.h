// Adaptive token-mask caches: per parser state, the vocabulary split into accepted, rejected
// and undecided tokens once, so that a mask at run time copies the accepted part and walks
// only the undecided few (XGrammar's adaptive token mask cache, keyed here on an engine's
// context-independent local state).
//
// A state's mask is computed by walking the token trie from the state's *local* view (the
// DPDA's top LR state over an unknown rest of the stack; Earley's newest sets with older
// origins unknown). A byte the local view cannot judge (it would pop or complete into the
// unknown part) makes the whole subtree under it undecided: the cache keeps the trie node
// and the local configuration it was reached from, and the fill resumes the walk there with
// the real context. Accepted tokens are kept as a bitmask row when many, as ids when few.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "bitmask.h"
#include "token_trie.h"
#include "trie_walk.h"

namespace cad {

struct StateMask {
    struct Undecided {
        uint32_t node;   // the trie node whose byte the local view could not judge
        int32_t config;  // the local configuration of its parent
    };
    std::vector<uint32_t> bits;     // accepted tokens as a row, or empty when kept as ids
    std::vector<int32_t> accepted;  // accepted tokens as ids (when ``bits`` is empty)
    std::vector<Undecided> undecided;
    std::vector<int32_t> contexts;  // what an engine needs to rebuild undecided configs

    // Write the accepted part into ``row`` (``words`` long); every other bit is cleared.
    void write(uint32_t* row, size_t words) const {
        if (!bits.empty()) {
            std::memcpy(row, bits.data(), words * sizeof(uint32_t));
            return;
        }
        std::memset(row, 0, words * sizeof(uint32_t));
        for (int32_t token : accepted) set_token(row, token);
    }
};

// Walks the trie from a local configuration with a memoised ``Step`` (an object with
// ``int32_t operator()(int32_t config, uint8_t byte)``) and collects a StateMask.
template <class Step>
class MaskBuilder {
  public:
    MaskBuilder(const TokenTrie& trie, Step& step) : trie_(trie), step_(step) {}

    StateMask build(int32_t local_root) {
        accepted_.clear();
        mask_ = StateMask();
        walk_subtree(trie_, 0, local_root, *this, frames_);
        const size_t words = bitmask_words(trie_.vocab_size());
        if (accepted_.size() * 8 > words) {
            mask_.bits.assign(words, 0u);
            for (int32_t token : accepted_) set_token(mask_.bits.data(), token);
        } else {
            mask_.accepted = accepted_;
        }
        return std::move(mask_);
    }

    int32_t step(int32_t config, uint8_t byte) { return step_(config, byte); }
    bool descend(int32_t) const { return true; }
    void accept(uint32_t node, int32_t) {
        accepted_.insert(accepted_.end(), trie_.tokens_begin(node), trie_.tokens_end(node));
    }
    void dependent(uint32_t node, int32_t config) { mask_.undecided.push_back({node, config}); }
    size_t mark() const { return 0; }
    void release(size_t) {}

  private:
    const TokenTrie& trie_;
    Step& step_;
    StateMask mask_;
    std::vector<int32_t> accepted_;
    std::vector<WalkFrame> frames_;
};

// Sets the bits of the tokens a full-context walk reaches; ``Step`` as for MaskBuilder plus
// ``size_t mark()`` / ``void release(size_t)`` for the scratch its configurations use.
template <class Step>
class RowWalker {
  public:
    RowWalker(const TokenTrie& trie, Step& step, uint32_t* row, std::vector<WalkFrame>& frames)
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
    std::vector<WalkFrame>& frames_;
};

}  // namespace cad
