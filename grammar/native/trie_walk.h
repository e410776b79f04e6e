// The prefix-sharing walk over a TokenTrie, generic over the parser that judges the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "token_trie.h"

namespace cad {

// Outcomes of one parser step besides a live configuration (>= 0).
constexpr int32_t kDead = -1;       // the byte is rejected
constexpr int32_t kDependent = -3;  // a local view cannot decide: it needs the context below

// Trie nodes this thread's walks have stepped, ever: a debug measure of a mask's work that,
// unlike its time, does not depend on the machine or its load. Walks add their count once,
// at their end, so the hot loop keeps it in a register.
inline thread_local uint64_t trie_nodes_stepped = 0;

// Configurations and walker marks by depth along the current path; reused across walks.
struct WalkScratch {
    std::vector<int32_t> configs;
    std::vector<size_t> marks;
};

template <class Walker>
void walk_subtree(const TokenTrie& trie, uint32_t start, int32_t config, Walker& walker,
                  WalkScratch& scratch);

template <class Walker>
void walk_listed(const TokenTrie& trie, uint32_t parent, int32_t config, Walker& walker,
                 WalkScratch& scratch);

// Judge ``child`` of a listed node whose configuration is ``config``, ``next`` being the
// child's step from it, and walk on below the child.
template <class Walker>
void walk_listed_child(const TokenTrie& trie, const TrieChild& child, int32_t config,
                       int32_t next, Walker& walker, WalkScratch& scratch) {
    if (next < 0) {
        if (next == kDependent) walker.dependent(child.node, config);
        return;
    }
    walker.accept(child.node, next);
    if (!walker.descend(next) || child.end == child.node + 1) return;
    if (child.listed) {
        walk_listed(trie, child.node, next, walker, scratch);
    } else {
        walk_subtree(trie, child.node, next, walker, scratch);
    }
}

// Walk the children of the listed node ``parent`` (configuration ``config``) from its list.
template <class Walker>
void walk_listed(const TokenTrie& trie, uint32_t parent, int32_t config, Walker& walker,
                 WalkScratch& scratch) {
    const size_t mark = walker.mark();
    const auto [first, last] = trie.children(parent);
    for (const TrieChild* child = first; child != last; ++child) {
        walker.release(mark);
        walk_listed_child(trie, *child, config, walker.step(config, child->byte), walker, scratch);
    }
    trie_nodes_stepped += static_cast<uint64_t>(last - first);
    walker.release(mark);
}

// Walk the subtree of ``start`` (whose configuration is ``config``), reading the nodes in
// preorder: each node is stepped from its parent's configuration, and a rejected or undecided
// node's whole subtree is jumped over. A listed ``start`` has its children read from its list.
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
    const TrieNode& root = trie.node(start);
    if (root.listed) {
        walk_listed(trie, start, config, walker, scratch);
        return;
    }
    const size_t deepest = static_cast<size_t>(trie.table().longest_token()) + 2;
    if (scratch.configs.size() < deepest) {
        scratch.configs.resize(deepest);
        scratch.marks.resize(deepest);
    }
    // Indexed by depth in the trie. Only the root and first bytes list their children, so
    // below ``start`` the nodes are read in preorder alone.
    int32_t* configs = scratch.configs.data();
    size_t* marks = scratch.marks.data();
    configs[root.depth] = config;
    marks[root.depth] = walker.mark();
    const uint32_t end = root.end;
    uint32_t index = start + 1;
    uint64_t stepped = 0;
    while (index < end) {
        ++stepped;
        const TrieNode& node = trie.node(index);
        const uint32_t depth = node.depth;
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
    trie_nodes_stepped += stepped;
    walker.release(marks[root.depth]);
}

// Call ``visit(child)`` (a TrieChild) for the children of ``node`` in byte order while it
// returns true.
template <class Visit>
void for_each_child(const TokenTrie& trie, uint32_t node, Visit visit) {
    if (trie.node(node).listed) {
        const auto [first, last] = trie.children(node);
        for (const TrieChild* child = first; child != last; ++child) {
            if (!visit(*child)) return;
        }
        return;
    }
    const uint32_t end = trie.subtree_end(node);
    for (uint32_t child = node + 1; child < end; child = trie.subtree_end(child)) {
        const TrieNode& at = trie.node(child);
        if (!visit(TrieChild{child, at.end, static_cast<uint32_t>(trie.subtree_tokens(child)),
                             at.byte, at.listed})) {
            return;
        }
    }
}

}  // namespace cad
