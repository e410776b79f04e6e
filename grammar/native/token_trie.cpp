#include "token_trie.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "fnv1a.h"
#include "region_cache.h"
#include "utf8.h"

namespace cad {

TokenTable::TokenTable(std::string data, std::vector<uint32_t> offsets, int32_t eos)
    : data_(std::move(data)), offsets_(std::move(offsets)), eos_(eos) {
    if (offsets_.empty() || offsets_.front() != 0 || offsets_.back() != data_.size() ||
        !std::is_sorted(offsets_.begin(), offsets_.end())) {
        throw std::invalid_argument("token offsets do not describe the token data");
    }
    if (eos_ >= vocab_size()) throw std::invalid_argument("eos token id outside the vocabulary");
    uint64_t digest = fnv1a::kOffsetBasis;
    for (int32_t id = 0; id < vocab_size(); ++id) {
        longest_ = std::max(longest_, static_cast<int32_t>(offsets_[id + 1] - offsets_[id]));
        digest = fnv1a::word_bytes(digest, offsets_[id + 1]);
    }
    digest = fnv1a::bytes(digest, data_);
    fingerprint_ = fnv1a::word_bytes(digest, static_cast<uint64_t>(static_cast<int64_t>(eos_)));
}

TokenTrie::~TokenTrie() = default;

int TokenSlice::step(int state, uint8_t byte) {
    if (state == 0 && (byte < 0x20 || byte == '"' || byte == '\\')) return -1;
    return utf8_next(static_cast<uint8_t>(state), byte);
}

const std::vector<std::vector<std::pair<uint8_t, int>>>& TokenSlice::moves() {
    static const std::vector<std::vector<std::pair<uint8_t, int>>> table = [] {
        std::vector<std::vector<std::pair<uint8_t, int>>> moves(1);
        for (size_t state = 0; state < moves.size(); ++state) {
            for (int byte = 0; byte < 256; ++byte) {
                const int next = step(static_cast<int>(state), static_cast<uint8_t>(byte));
                if (next < 0) continue;
                if (static_cast<size_t>(next) >= moves.size()) moves.resize(static_cast<size_t>(next) + 1);
                moves[state].emplace_back(static_cast<uint8_t>(byte), next);
            }
        }
        return moves;
    }();
    return table;
}

const TokenSlice& TokenTrie::string_slice() const {
    std::call_once(slice_once_, [this] {
        auto slice = std::make_unique<TokenSlice>();
        const TokenTable& tokens = *table_;
        std::vector<uint32_t> row(bitmask_words(tokens.vocab_size()), 0u);
        size_t count = 0;
        std::string rest_data;
        std::vector<uint32_t> rest_offsets{0};
        for (int32_t id = 0; id < tokens.vocab_size(); ++id) {
            const std::string_view bytes = tokens.token(id);
            int state = bytes.empty() ? -1 : 0;
            for (size_t i = 0; i < bytes.size() && state >= 0; ++i) {
                state = TokenSlice::step(state, static_cast<uint8_t>(bytes[i]));
            }
            if (state >= 0) {
                set_token(row.data(), id);
                ++count;
            } else {
                rest_data.append(bytes);
            }
            rest_offsets.push_back(static_cast<uint32_t>(rest_data.size()));
        }
        slice->tokens = TokenList::from_row(std::move(row), count);
        slice->rest = std::make_unique<TokenTrie>(std::make_shared<TokenTable>(
            std::move(rest_data), std::move(rest_offsets), tokens.eos()));
        string_slice_ = std::move(slice);
    });
    return *string_slice_;
}

TokenTrie::TokenTrie(std::shared_ptr<const TokenTable> table)
    : table_(std::move(table)), regions_(std::make_unique<RegionCache>()) {
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
    std::vector<uint32_t> own_tokens{0};
    std::vector<uint32_t> path{0};
    nodes_.push_back({0, 0, 0});
    std::string_view previous;
    for (int32_t id : order) {
        std::string_view bytes = tokens.token(id);
        size_t common = 0;
        while (common < previous.size() && common < bytes.size() &&
               previous[common] == bytes[common]) {
            ++common;
        }
        while (path.size() > common + 1) {
            nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
            path.pop_back();
        }
        for (size_t d = common; d < bytes.size(); ++d) {
            path.push_back(static_cast<uint32_t>(nodes_.size()));
            nodes_.push_back({0, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(bytes[d])});
            own_tokens.push_back(0);
        }
        ++own_tokens[path.back()];
        ids_.push_back(id);
        previous = bytes;
    }
    while (!path.empty()) {
        nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
        path.pop_back();
    }
    token_begin_.assign(nodes_.size() + 1, 0);
    std::partial_sum(own_tokens.begin(), own_tokens.end(), token_begin_.begin() + 1);
    index_children();
    list_children();
}

void TokenTrie::index_children() {
    const auto count = static_cast<uint32_t>(nodes_.size());
    child_begin_.assign(count + 1, 0);
    child_bytes_.reserve(count);
    child_nodes_.reserve(count);
    for (uint32_t node = 0; node < count; ++node) {
        child_begin_[node] = static_cast<uint32_t>(child_nodes_.size());
        for (uint32_t child = node + 1; child < subtree_end(node); child = subtree_end(child)) {
            child_bytes_.push_back(nodes_[child].byte);
            child_nodes_.push_back(child);
        }
    }
    child_begin_[count] = static_cast<uint32_t>(child_nodes_.size());
}

void TokenTrie::list_children() {
    list_begin_.assign(257, 0);
    list_end_.assign(257, 0);
    auto child_list = [this](uint32_t node) {
        return std::vector<uint32_t>(child_nodes_.begin() + child_begin_[node],
                                     child_nodes_.begin() + child_begin_[node + 1]);
    };
    const std::vector<uint32_t> first_bytes = child_list(0);
    std::vector<std::vector<uint32_t>> grandchildren;
    for (uint32_t node : first_bytes) {
        grandchildren.push_back(child_list(node));
        nodes_[node].listed = grandchildren.back().size() >= kListedChildren;
    }
    nodes_[0].listed = 1;
    auto append = [this](size_t list, const std::vector<uint32_t>& children) {
        list_begin_[list] = static_cast<uint32_t>(children_.size());
        for (uint32_t child : children) {
            const TrieNode& node = nodes_[child];
            children_.push_back({child, node.end, static_cast<uint32_t>(subtree_tokens(child)),
                                 node.byte, node.listed});
        }
        list_end_[list] = static_cast<uint32_t>(children_.size());
    };
    append(256, first_bytes);
    for (size_t i = 0; i < first_bytes.size(); ++i) {
        if (nodes_[first_bytes[i]].listed) append(nodes_[first_bytes[i]].byte, grandchildren[i]);
    }
}
}  // namespace cad
