// The LR(1) tables run as a deterministic pushdown automaton over bytes, on persistent stacks
// (the native form of ``cad.grammar.cfg.dpda``).
//
// An LR parser answers a byte with a chain of reductions ending in one shift; Pre3 folds each
// chain into one edge (pop k entries, push a few states). ``lr_step`` computes that edge on
// the fly from ACTION/GOTO, working on a small array of pending pushes over the persistent
// stack, and materialises only the final pushes: a stack is a node (state, parent), shared by
// every longer stack built on it, so rollback is moving a pointer back and equal prefixes cost
// nothing twice.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "flat_index.h"
#include "lr1.h"
#include "trie_walk.h"

namespace cad::cfg {

constexpr int32_t kBottom = -1;        // below the start state
constexpr int32_t kUnknownBelow = -2;  // the rest of a local view's stack: not known
constexpr int32_t kAccepted = -4;      // the end-of-input atom reduced to acceptance

struct StackNode {
    int32_t state;
    int32_t parent;  // a node, kBottom or kUnknownBelow
};

// A matcher's stacks: nodes appended, truncated on rollback.
class GrowingStack {
  public:
    int32_t state(int32_t node) const { return nodes_[node].state; }
    int32_t parent(int32_t node) const { return nodes_[node].parent; }
    int32_t push(int32_t state, int32_t parent) {
        nodes_.push_back({state, parent});
        return static_cast<int32_t>(nodes_.size() - 1);
    }
    size_t size() const { return nodes_.size(); }
    void truncate(size_t size) { nodes_.resize(size); }

  private:
    std::vector<StackNode> nodes_;
};

// Local views' stacks, interned so that a configuration is one int and transitions can be
// memoised per (node, atom).
class InternedStack {
  public:
    int32_t state(int32_t node) const { return nodes_[node].state; }
    int32_t parent(int32_t node) const { return nodes_[node].parent; }
    int32_t push(int32_t state, int32_t parent);
    size_t size() const { return nodes_.size(); }
    // An upper bound on the memory held: the nodes, and an index of 16-byte slots at least a
    // quarter full once past its first 128 slots.
    size_t bytes() const {
        return nodes_.capacity() * sizeof(StackNode) + 64 * std::max<size_t>(nodes_.size(), 32);
    }

  private:
    std::vector<StackNode> nodes_;
    FlatIndex ids_;  // (state, parent) -> node; a state >= 0 never packs to FlatIndex::kNoKey
};

// One byte (atom) from stack ``top``: the new top node, kDead, kDependent (a local view would
// have to look below its bottom) or, for the end-of-input atom only, kAccepted. With
// ``materialise`` false nothing is pushed and a live result is returned as ``top`` itself.
template <class Stack>
int32_t lr_step(const LrTables& tables, Stack& stack, int32_t top, int32_t atom,
                std::vector<int32_t>& pending, bool materialise = true) {
    if (top >= 0 && tables.act(stack.state(top), atom) == kActionError) return kDead;
    pending.clear();
    int32_t base = top;
    for (int32_t guard = 0;; ++guard) {
        if (guard > (1 << 20)) throw std::logic_error("an LR reduction chain does not end");
        const int32_t exposed = pending.empty() ? (base >= 0 ? stack.state(base) : base)
                                                : pending.back();
        if (exposed == kUnknownBelow) return kDependent;
        if (exposed < 0) return kDead;
        const int32_t action = tables.act(exposed, atom);
        if (action >= 0) {
            pending.push_back(action);
            break;
        }
        if (action == kActionError) return kDead;
        if (action == kActionAccept) return kAccepted;
        const int32_t production = reduced_production(action);
        int32_t length = tables.production_length[production];
        const int32_t taken = std::min<int32_t>(length, static_cast<int32_t>(pending.size()));
        pending.resize(pending.size() - taken);
        for (length -= taken; length > 0; --length) {
            if (base < 0) return base == kUnknownBelow ? kDependent : kDead;
            base = stack.parent(base);
        }
        const int32_t below = pending.empty() ? (base >= 0 ? stack.state(base) : base)
                                              : pending.back();
        if (below == kUnknownBelow) return kDependent;
        if (below < 0) return kDead;
        const int32_t target = tables.go(below, tables.production_lhs[production]);
        if (target < 0) return kDead;
        pending.push_back(target);
    }
    if (!materialise) return top;
    for (int32_t state : pending) base = stack.push(state, base);
    return base;
}

}  // namespace cad::cfg
