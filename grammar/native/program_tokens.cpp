#include "program_tokens.h"

#include <algorithm>
#include <stdexcept>

#include "fnv1a.h"

namespace cad::drafting {

size_t TokenSource::EchoHash::operator()(const EchoKey& key) const {
    uint64_t h = static_cast<uint64_t>(key.kind) + 0x9E3779B97F4A7C15ULL;
    for (int64_t value : key.values) {
        h ^= static_cast<uint64_t>(value) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    }
    return static_cast<size_t>(h);
}

const std::vector<int32_t>& TokenSource::literal(const std::string& bytes) {
    auto found = literals_.find(bytes);
    if (found == literals_.end()) found = literals_.emplace(bytes, encode_literal(bytes)).first;
    return found->second;
}

const Echo& TokenSource::echo(const OpView& op) {
    const EchoKey key{op.kind, op.values};
    auto found = echoes_.find(key);
    if (found == echoes_.end()) found = echoes_.emplace(key, encode_echo(op)).first;
    return found->second;
}

bool TokenSource::has_echo(const OpView& op) const {
    return echoes_.count(EchoKey{op.kind, op.values}) > 0;
}

void prefix_tokens(const TokenTrie& trie, std::string_view text,
                   std::vector<std::pair<uint32_t, int32_t>>& out) {
    out.clear();
    const size_t longest = static_cast<size_t>(trie.table().longest_token());
    uint32_t node = 0;
    for (size_t i = 0; i < std::min(text.size(), longest); ++i) {
        node = trie.child(node, static_cast<uint8_t>(text[i]));
        if (node == 0) return;
        const int32_t* first = trie.tokens_begin(node);
        const int32_t* last = trie.tokens_end(node);
        if (first != last) out.emplace_back(static_cast<uint32_t>(i + 1), *std::min_element(first, last));
    }
}

ProgramTokenizer::ProgramTokenizer(std::shared_ptr<const program::ProgramIndex> index,
                                   std::shared_ptr<const TokenTrie> trie,
                                   std::vector<uint64_t> line_widths, bool subline,
                                   TokenSource& source)
    : trie_(std::move(trie)),
      scratch_(std::move(index), std::move(line_widths), subline),
      source_(source) {}

uint64_t ProgramTokenizer::key_of(const program::State& state, std::string_view rest,
                                  int32_t limit) {
    uint64_t h = fnv1a::kOffsetBasis;
    const auto mix = [&h](uint64_t value) {
        h ^= value + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    };
    mix(static_cast<uint64_t>(state.mode) | static_cast<uint64_t>(state.opener) << 8 |
        static_cast<uint64_t>(state.length) << 16 | static_cast<uint64_t>(state.literal) << 24 |
        static_cast<uint64_t>(state.pending) << 32 | static_cast<uint64_t>(state.matched) << 40 |
        static_cast<uint64_t>(state.kind) << 48 | static_cast<uint64_t>(state.field_count) << 56);
    mix(state.digit_count);
    mix(state.digits);
    for (uint64_t value : state.values) mix(value);
    mix(static_cast<uint64_t>(limit));
    return fnv1a::bytes(h, rest);
}

bool ProgramTokenizer::begin(std::string_view prefix) {
    started_ = !prefix.empty();
    refused_ = started_ && !scratch_.accept_bytes(std::string(prefix));
    if (refused_) started_ = false;
    return !refused_;
}

void ProgramTokenizer::end() {
    if (started_) scratch_.rollback(1);
    started_ = false;
    refused_ = false;
}

const OpTokens& ProgramTokenizer::after(std::string_view rest, int32_t limit) {
    if (refused_) return none_;
    const program::State& state = scratch_.state();
    uint64_t key = key_of(state, rest, limit);
    if (key == FlatIndex::kNoKey) key = 0;
    const int32_t newest = newest_.find(key);
    for (int32_t index = newest; index >= 0; index = entries_[static_cast<size_t>(index)].next) {
        const Entry& entry = entries_[static_cast<size_t>(index)];
        if (entry.limit == limit && entry.rest == rest && entry.state == state) return entry.tokens;
    }
    entries_.push_back({state, std::string(rest), limit, tokenize(rest, limit), newest});
    newest_.assign(key, static_cast<int32_t>(entries_.size() - 1));
    return entries_.back().tokens;
}

const OpTokens& ProgramTokenizer::op_tokens(std::string_view prefix, std::string_view text,
                                            int32_t limit) {
    const bool accepted = begin(prefix);
    const OpTokens& found =
        accepted ? after(text.size() > prefix.size() ? text.substr(prefix.size()) : std::string_view(),
                         limit)
                 : none_;
    end();
    return found;
}

OpTokens ProgramTokenizer::tokenize(std::string_view text, int32_t limit) {
    program::ProgramMatcher& matcher = scratch_;
    OpTokens out;
    size_t steps = 0;
    size_t position = 0;
    while (matcher.ops().empty() && !matcher.is_accepting() &&
           static_cast<int32_t>(out.tokens.size()) < limit) {
        const std::string forced = matcher.forced_bytes();
        if (!forced.empty()) {
            const std::string_view expected =
                position < text.size() ? text.substr(position, forced.size()) : std::string_view();
            if (forced.compare(0, expected.size(), expected) != 0) break;
            const std::vector<int32_t>& ids = source_.literal(forced);
            for (int32_t token : ids) {
                if (!matcher.accept_token(token)) {
                    matcher.rollback(steps);
                    throw std::runtime_error("forced literal rejected by the program FSM");
                }
                ++steps;
            }
            out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
            out.decided.insert(out.decided.end(), ids.size(), 0);
            position += forced.size();
            continue;
        }
        const std::string_view remaining =
            position < text.size() ? text.substr(position) : std::string_view();
        prefix_tokens(*trie_, remaining, prefixes_);
        int32_t chosen = -1;
        for (auto it = prefixes_.rbegin(); it != prefixes_.rend(); ++it) {
            if (matcher.accept_token(it->second)) {
                chosen = it->second;
                position += it->first;
                break;
            }
        }
        if (chosen < 0) break;
        ++steps;
        out.tokens.push_back(chosen);
        out.decided.push_back(1);
    }
    out.complete = !matcher.ops().empty() || matcher.is_accepting();
    matcher.rollback(steps);
    return out;
}

}  // namespace cad::drafting
