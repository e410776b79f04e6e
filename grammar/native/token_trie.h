// The vocabulary as a byte table and a prefix tree (token trie), shared by every native engine.
//
// Tokens are sorted by their bytes and laid out as a trie in depth-first preorder: node 0 is
// the empty prefix, every other node one byte longer than its parent, and a node's subtree is
// the contiguous range [node, subtree_end(node)). A mask walk reads the nodes in order, steps
// the parser once per node from its parent's configuration and jumps over a whole subtree
// when the parser rejects its byte: tokens that share a prefix share the work of checking it
// (the prefix-sharing walk of llguidance's toktrie and XGrammar's sorted vocabulary).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bitmask.h"

namespace cad {

class RegionCache;
struct TokenSlice;

// Every token's bytes in one buffer. An empty token never appears in text (special or padded
// ids); ``eos`` is -1 when there is none.
class TokenTable {
  public:
    TokenTable(std::string data, std::vector<uint32_t> offsets, int32_t eos);

    int32_t vocab_size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
    int32_t eos() const { return eos_; }
    int32_t longest_token() const { return longest_; }
    // A 64-bit FNV-1a digest of every token's bytes and the end-of-sequence id: what tables
    // derived from the vocabulary are checked against.
    uint64_t fingerprint() const { return fingerprint_; }
    std::string_view token(int32_t id) const {
        return {data_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
    }

  private:
    std::string data_;
    std::vector<uint32_t> offsets_;
    int32_t eos_;
    int32_t longest_ = 0;
    uint64_t fingerprint_ = 0;
};

// One trie node: its byte, its depth and where its subtree ends (8 bytes, in preorder, so a
// walk reads nodes sequentially and skips a rejected subtree with one jump). The root and the
// nodes of first bytes with many children also list them in one place (``listed``).
struct TrieNode {
    uint32_t end;
    uint16_t depth;
    uint8_t byte;
    uint8_t listed = 0;
};

// A listed node's child: where it is and where its subtree ends, its byte, whether it lists
// its own children, and how many tokens its subtree holds.
struct TrieChild {
    uint32_t node;
    uint32_t end;
    uint32_t tokens;
    uint8_t byte;
    uint8_t listed;
};

// First-byte nodes with at least this many children list them. In preorder a node's children
// lie far apart (each after its own subtree), so a walk that rejects most of them would
// otherwise touch one cache line per child; near the root, where nearly every first visit to
// a parser state walks, that is most of the cost of a sparse mask.
constexpr size_t kListedChildren = 8;

class TokenTrie {
  public:
    explicit TokenTrie(std::shared_ptr<const TokenTable> table);
    ~TokenTrie();

    const TokenTable& table() const { return *table_; }
    const std::shared_ptr<const TokenTable>& shared_table() const { return table_; }
    int32_t vocab_size() const { return table_->vocab_size(); }
    uint32_t node_count() const { return static_cast<uint32_t>(nodes_.size()); }
    // Walks through common regions of parser automata, shared by every grammar over this
    // vocabulary (thread-safe).
    RegionCache& regions() const { return *regions_; }
    // The tokens made of JSON string characters (built on first use, thread-safe).
    const TokenSlice& string_slice() const;

    const TrieNode& node(uint32_t index) const { return nodes_[index]; }
    uint32_t subtree_end(uint32_t index) const { return nodes_[index].end; }
    uint16_t depth(uint32_t index) const { return nodes_[index].depth; }
    uint8_t byte(uint32_t index) const { return nodes_[index].byte; }
    // Token ids whose bytes are exactly this node's path (several ids may share bytes).
    const int32_t* tokens_begin(uint32_t index) const { return ids_.data() + token_begin_[index]; }
    const int32_t* tokens_end(uint32_t index) const { return ids_.data() + token_begin_[index + 1]; }
    // How many tokens the subtree of ``index`` holds (ids are stored in preorder).
    size_t subtree_tokens(uint32_t index) const {
        return token_begin_[nodes_[index].end] - token_begin_[index];
    }
    // The children of a listed node, in byte order, stored contiguously.
    std::pair<const TrieChild*, const TrieChild*> children(uint32_t index) const {
        const TrieNode& node = nodes_[index];
        const size_t list = node.depth == 0 ? 256 : node.byte;
        return {children_.data() + list_begin_[list], children_.data() + list_end_[list]};
    }
    // The child of ``index`` for ``byte``, or 0 when there is none: a binary search of the
    // node's children, stored together (a handful of cache lines however many children it
    // has, where following them in preorder reads one line per child). What tokenizing text
    // along the trie uses, one byte at a time.
    uint32_t child(uint32_t index, uint8_t byte) const {
        const uint8_t* first = child_bytes_.data() + child_begin_[index];
        const uint8_t* last = child_bytes_.data() + child_begin_[index + 1];
        const uint8_t* found = std::lower_bound(first, last, byte);
        return found != last && *found == byte ? child_nodes_[found - child_bytes_.data()] : 0;
    }
    // The bytes from the root to ``index``.
    std::string_view path(uint32_t index) const {
        if (nodes_[index].depth == 0) return {};
        return table_->token(ids_[token_begin_[index]]).substr(0, nodes_[index].depth);
    }

  private:
    void list_children();
    void index_children();

    std::shared_ptr<const TokenTable> table_;
    std::unique_ptr<RegionCache> regions_;
    mutable std::once_flag slice_once_;
    mutable std::unique_ptr<TokenSlice> string_slice_;
    std::vector<TrieNode> nodes_;
    std::vector<uint32_t> token_begin_;
    std::vector<int32_t> ids_;
    // Where each list lies in ``children_``: by first byte, and the root's at 256.
    std::vector<uint32_t> list_begin_;
    std::vector<uint32_t> list_end_;
    std::vector<TrieChild> children_;
    // Every node's children (``child``): bytes and nodes of node ``i``'s children at
    // [child_begin_[i], child_begin_[i + 1]), in byte order; 5 bytes a node in all.
    std::vector<uint32_t> child_begin_;
    std::vector<uint8_t> child_bytes_;
    std::vector<uint32_t> child_nodes_;
};

// A set of tokens a common kind of parser state accepts whole, precomputed per vocabulary
// (llguidance's tokenizer slices): here the tokens made only of characters a JSON string may
// hold unescaped, valid UTF-8 though possibly ending inside a character. A state that accepts
// every such token (checked on a product of the slice's automaton with the parser's) takes
// them in one copy, and its walk covers only the trie of the other tokens.
struct TokenSlice {
    TokenList tokens;
    std::unique_ptr<TokenTrie> rest;  // the trie of every token outside the slice

    // The slice automaton: its state after ``byte`` from ``state`` (0: a character boundary),
    // or -1 when the byte leaves the slice.
    static int step(int state, uint8_t byte);
    // Per slice state, every byte that stays in the slice with the state it leads to.
    static const std::vector<std::vector<std::pair<uint8_t, int>>>& moves();
};

}  // namespace cad
