// The prefix-sharing walk over a TokenTrie, generic over the parser that judges the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "token_trie.h"

namespace cad {

// Outcomes of one parser step besides a live configuration (>= 0).
constexpr int32_t kDead = -1;       // the byte is rejected
constexpr int32_t kDependent = -3;  // a local view cannot decide: it needs the context below

// Configurations and walker marks by depth along the current path; reused across walks.
struct WalkScratch {
    std::vector<int32_t> configs;
    std::vector<size_t> marks;
};

// Walk the subtree of ``start`` (whose configuration is ``config``), reading the nodes in
// preorder: each node is stepped from its parent's configuration, and a rejected or undecided
// node's whole subtree is jumped over.
//
// ``Walker`` provides:
//   int32_t step(int32_t config, uint8_t byte)  -> next config, kDead or kDependent
//   bool descend(int32_t config)                -> whether longer tokens may go on from here
//   void accept(uint32_t node, int32_t config)  -> the tokens at ``node`` are allowed
//   void dependent(uint32_t node, int32_t config) -> the subtree of ``node`` is undecided
//                                                  (``config`` is its parent's)
//   size_t mark() / void release(size_t)        -> scratch a walker may free once the path
//                                                  leaves a node (e.g. pushed stack nodes)
template <class Walker>
void walk_subtree(const TokenTrie& trie, uint32_t start, int32_t config, Walker& walker,
                  WalkScratch& scratch) {
    const uint32_t end = trie.subtree_end(start);
    const uint32_t base = trie.depth(start);
    const size_t deepest = static_cast<size_t>(trie.table().longest_token()) + 2;
    if (scratch.configs.size() < deepest) {
        scratch.configs.resize(deepest);
        scratch.marks.resize(deepest);
    }
    int32_t* configs = scratch.configs.data();
    size_t* marks = scratch.marks.data();
    configs[0] = config;
    marks[0] = walker.mark();
    uint32_t index = start + 1;
    while (index < end) {
        const TrieNode& node = trie.node(index);
        const uint32_t depth = node.depth - base;
        walker.release(marks[depth - 1]);
        const int32_t parent = configs[depth - 1];
        const int32_t next = walker.step(parent, node.byte);
        if (next < 0) {
            if (next == kDependent) walker.dependent(index, parent);
            index = node.end;
            continue;
        }
        walker.accept(index, next);
        if (!walker.descend(next)) {
            index = node.end;
            continue;
        }
        configs[depth] = next;
        marks[depth] = walker.mark();
        ++index;
    }
    walker.release(marks[0]);
}

// Call ``visit(child)`` for every child of ``node``.
template <class Visit>
void for_each_child(const TokenTrie& trie, uint32_t node, Visit visit) {
    const uint32_t end = trie.subtree_end(node);
    for (uint32_t child = node + 1; child < end; child = trie.subtree_end(child)) visit(child);
}

}  // namespace cad
