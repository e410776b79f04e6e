// The vocabulary as a byte table and a prefix tree (token trie), shared by every native engine.
//
// Tokens are sorted by their bytes and laid out as a trie in depth-first preorder: node 0 is
// the empty prefix, every other node one byte longer than its parent, and a node's subtree is
// the contiguous range [node, subtree_end(node)). A mask walk reads the nodes in order, steps
// the parser once per node from its parent's configuration and jumps over a whole subtree
// when the parser rejects its byte: tokens that share a prefix share the work of checking it
// (the prefix-sharing walk of llguidance's toktrie and XGrammar's sorted vocabulary).
#pragma once

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
// walk reads nodes sequentially and skips a rejected subtree with one jump).
struct TrieNode {
    uint32_t end;
    uint16_t depth;
    uint8_t byte;
};

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
    // The bytes from the root to ``index``.
    std::string_view path(uint32_t index) const {
        if (nodes_[index].depth == 0) return {};
        return table_->token(ids_[token_begin_[index]]).substr(0, nodes_[index].depth);
    }

  private:
    std::shared_ptr<const TokenTable> table_;
    std::unique_ptr<RegionCache> regions_;
    mutable std::once_flag slice_once_;
    mutable std::unique_ptr<TokenSlice> string_slice_;
    std::vector<TrieNode> nodes_;
    std::vector<uint32_t> token_begin_;
    std::vector<int32_t> ids_;
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
};

}  // namespace cad
