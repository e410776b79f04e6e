// The vocabulary as a byte table and a prefix tree (token trie), shared by every native engine.
//
// Tokens are sorted by their bytes and laid out as a trie in depth-first preorder: node 0 is
// the empty prefix, every other node one byte longer than its parent, and a node's subtree is
// the contiguous range [node, subtree_end(node)). A mask walk visits a node's children, steps
// the parser once per child and skips a whole subtree when the parser rejects its byte:
// tokens that share a prefix share the work of checking it (the prefix-sharing walk of
// llguidance's toktrie and XGrammar's sorted vocabulary).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cad {

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

class TokenTrie {
  public:
    explicit TokenTrie(std::shared_ptr<const TokenTable> table);

    const TokenTable& table() const { return *table_; }
    const std::shared_ptr<const TokenTable>& shared_table() const { return table_; }
    int32_t vocab_size() const { return table_->vocab_size(); }
    uint32_t node_count() const { return static_cast<uint32_t>(end_.size()); }

    // The children of ``node`` are child(k) for k in [children_begin(node), children_end(node)),
    // in increasing byte order.
    uint32_t children_begin(uint32_t node) const { return child_begin_[node]; }
    uint32_t children_end(uint32_t node) const { return child_begin_[node + 1]; }
    uint32_t child(uint32_t k) const { return child_[k]; }
    uint8_t child_byte(uint32_t k) const { return child_byte_[k]; }

    uint32_t subtree_end(uint32_t node) const { return end_[node]; }
    uint8_t byte(uint32_t node) const { return byte_[node]; }
    uint16_t depth(uint32_t node) const { return depth_[node]; }
    // Token ids whose bytes are exactly this node's path (several ids may share bytes).
    const int32_t* tokens_begin(uint32_t node) const { return ids_.data() + token_begin_[node]; }
    const int32_t* tokens_end(uint32_t node) const { return ids_.data() + token_begin_[node + 1]; }
    // Token ids of the whole subtree of ``node`` (ids are stored in preorder).
    const int32_t* subtree_tokens_end(uint32_t node) const {
        return ids_.data() + token_begin_[end_[node]];
    }
    // The bytes from the root to ``node``.
    std::string_view path(uint32_t node) const {
        if (depth_[node] == 0) return {};
        return table_->token(ids_[token_begin_[node]]).substr(0, depth_[node]);
    }

  private:
    std::shared_ptr<const TokenTable> table_;
    std::vector<uint32_t> end_;
    std::vector<uint16_t> depth_;
    std::vector<uint8_t> byte_;
    std::vector<uint32_t> token_begin_;
    std::vector<int32_t> ids_;
    std::vector<uint32_t> child_begin_;
    std::vector<uint32_t> child_;
    std::vector<uint8_t> child_byte_;
};

}  // namespace cad
