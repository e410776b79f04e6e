#include "token_trie.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace cad {

TokenTable::TokenTable(std::string data, std::vector<uint32_t> offsets, int32_t eos)
    : data_(std::move(data)), offsets_(std::move(offsets)), eos_(eos) {
    if (offsets_.empty() || offsets_.front() != 0 || offsets_.back() != data_.size() ||
        !std::is_sorted(offsets_.begin(), offsets_.end())) {
        throw std::invalid_argument("token offsets do not describe the token data");
    }
    if (eos_ >= vocab_size()) throw std::invalid_argument("eos token id outside the vocabulary");
    uint64_t digest = 14695981039346656037ULL;
    auto mix = [&digest](uint64_t value) {
        for (int shift = 0; shift < 64; shift += 8) {
            digest = (digest ^ ((value >> shift) & 0xFF)) * 1099511628211ULL;
        }
    };
    for (int32_t id = 0; id < vocab_size(); ++id) {
        longest_ = std::max(longest_, static_cast<int32_t>(offsets_[id + 1] - offsets_[id]));
        mix(offsets_[id + 1]);
    }
    for (unsigned char byte : data_) digest = (digest ^ byte) * 1099511628211ULL;
    mix(static_cast<uint64_t>(static_cast<int64_t>(eos_)));
    fingerprint_ = digest;
}

TokenTrie::TokenTrie(std::shared_ptr<const TokenTable> table) : table_(std::move(table)) {
    const TokenTable& tokens = *table_;
    std::vector<int32_t> order;
    for (int32_t id = 0; id < tokens.vocab_size(); ++id) {
        if (!tokens.token(id).empty()) order.push_back(id);
    }
    std::stable_sort(order.begin(), order.end(), [&tokens](int32_t a, int32_t b) {
        return tokens.token(a) < tokens.token(b);
    });

    // Scan the sorted tokens: the nodes of each token's bytes past the common prefix with the
    // previous token are new, and they are created in preorder.
    std::vector<uint32_t> parent{UINT32_MAX};
    std::vector<uint32_t> own_tokens{0};
    std::vector<uint32_t> path{0};
    end_.push_back(0);
    depth_.push_back(0);
    byte_.push_back(0);
    std::string_view previous;
    for (int32_t id : order) {
        std::string_view bytes = tokens.token(id);
        size_t common = 0;
        while (common < previous.size() && common < bytes.size() &&
               previous[common] == bytes[common]) {
            ++common;
        }
        while (path.size() > common + 1) {
            end_[path.back()] = static_cast<uint32_t>(end_.size());
            path.pop_back();
        }
        for (size_t d = common; d < bytes.size(); ++d) {
            uint32_t node = static_cast<uint32_t>(end_.size());
            parent.push_back(path.back());
            end_.push_back(0);
            depth_.push_back(static_cast<uint16_t>(d + 1));
            byte_.push_back(static_cast<uint8_t>(bytes[d]));
            own_tokens.push_back(0);
            path.push_back(node);
        }
        ++own_tokens[path.back()];
        ids_.push_back(id);
        previous = bytes;
    }
    while (!path.empty()) {
        end_[path.back()] = static_cast<uint32_t>(end_.size());
        path.pop_back();
    }

    const uint32_t nodes = node_count();
    token_begin_.assign(nodes + 1, 0);
    std::partial_sum(own_tokens.begin(), own_tokens.end(), token_begin_.begin() + 1);

    child_begin_.assign(nodes + 1, 0);
    for (uint32_t node = 1; node < nodes; ++node) ++child_begin_[parent[node] + 1];
    std::partial_sum(child_begin_.begin(), child_begin_.end(), child_begin_.begin());
    child_.resize(nodes > 0 ? nodes - 1 : 0);
    child_byte_.resize(child_.size());
    std::vector<uint32_t> filled(child_begin_.begin(), child_begin_.end() - 1);
    for (uint32_t node = 1; node < nodes; ++node) {
        uint32_t slot = filled[parent[node]]++;
        child_[slot] = node;
        child_byte_[slot] = byte_[node];
    }
}

}  // namespace cad
