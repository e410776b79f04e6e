// The prefix-sharing walk over a TokenTrie, generic over the parser that judges the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "token_trie.h"

namespace cad {

// Outcomes of one parser step besides a live configuration (>= 0).
constexpr int32_t kDead = -1;       // the byte is rejected
constexpr int32_t kDependent = -3;  // a local view cannot decide: it needs the context below

// Depth-first walk of the subtree of ``start`` from parser configuration ``config``
// (``frames`` is scratch, reused across walks).
//
// ``Walker`` provides:
//   int32_t step(int32_t config, uint8_t byte)  -> next config, kDead or kDependent
//   bool descend(int32_t config)                -> whether tokens may go on from this config
//   void accept(uint32_t node, int32_t config)  -> the tokens at ``node`` are allowed
//   void dependent(uint32_t node, int32_t config) -> the subtree of ``node`` is undecided
//                                                  (``config`` is its parent's)
//   size_t mark() / void release(size_t)        -> scratch a walker may free on backtracking
// A rejected byte skips the child's whole subtree: tokens sharing a rejected prefix are never
// looked at again.
struct WalkFrame {
    uint32_t next;
    uint32_t end;
    int32_t config;
    size_t mark;
};

template <class Walker>
void walk_subtree(const TokenTrie& trie, uint32_t start, int32_t config, Walker& walker,
                  std::vector<WalkFrame>& frames) {
    frames.clear();
    frames.push_back({trie.children_begin(start), trie.children_end(start), config, walker.mark()});
    while (!frames.empty()) {
        WalkFrame& frame = frames.back();
        if (frame.next == frame.end) {
            walker.release(frame.mark);
            frames.pop_back();
            continue;
        }
        const uint32_t k = frame.next++;
        const uint32_t child = trie.child(k);
        const size_t mark = walker.mark();
        const int32_t next = walker.step(frame.config, trie.child_byte(k));
        if (next == kDead) {
            walker.release(mark);
            continue;
        }
        if (next == kDependent) {
            walker.release(mark);
            walker.dependent(child, frame.config);
            continue;
        }
        walker.accept(child, next);
        if (trie.children_begin(child) != trie.children_end(child) && walker.descend(next)) {
            frames.push_back({trie.children_begin(child), trie.children_end(child), next, mark});
        } else {
            walker.release(mark);
        }
    }
}

}  // namespace cad
