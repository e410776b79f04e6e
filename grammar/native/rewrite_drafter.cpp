#include "rewrite_drafter.h"

#include <algorithm>
#include <utility>

namespace cad::drafting {

double RewriteConfig::rate(int32_t kind, int32_t rank, int32_t depth, bool copying) const {
    const std::vector<SourceSpec>& specs = sources[static_cast<size_t>(kind)];
    if (rank >= static_cast<int32_t>(specs.size())) return default_rate;
    const std::vector<double>& table =
        copying ? specs[static_cast<size_t>(rank)].copying : specs[static_cast<size_t>(rank)].editing;
    if (table.empty()) return default_rate;
    const size_t bucket = static_cast<size_t>(depth_bucket(depth));
    return table[std::min(bucket, table.size() - 1)];
}

RewriteDrafter::RewriteDrafter(std::vector<int32_t> document, int32_t stop, RewriteConfig config)
    : document_(std::move(document)), config_(std::move(config)) {
    source_ = document_;
    if (stop >= 0) source_.push_back(stop);
    starts_ = SortedNgrams(document_, config_.min_ngram, config_.max_ngram);
}

void RewriteDrafter::advance(int32_t token, int32_t origin) {
    const int32_t size = static_cast<int32_t>(source_.size());
    const bool expected = position_ < size && source_[static_cast<size_t>(position_)] == token;
    copying_ = origin >= 0 || expected;
    if (origin >= 0) {
        position_ = origin + 1;
    } else if (expected) {
        ++position_;
    }
    output_.push_back(token);
}

void RewriteDrafter::advance_path(const DraftTree& tree, const int32_t* path, size_t count) {
    for (size_t i = 0; i < count; ++i) advance(tree.token(path[i]), tree.origin(path[i]));
}

Candidate RewriteDrafter::copy_of(int32_t kind, int32_t rank, int32_t start,
                                  int32_t length) const {
    const int64_t size = static_cast<int64_t>(source_.size());
    const int64_t end = std::min<int64_t>(static_cast<int64_t>(start) + length, size);
    return {kind, rank, -1, false, start, static_cast<int32_t>(std::max<int64_t>(0, end - start))};
}

void RewriteDrafter::anchors(const int32_t* tail, int32_t tail_size, int64_t total,
                             int32_t limit, std::vector<int32_t>& seen,
                             std::vector<int32_t>& found) const {
    const int64_t size = static_cast<int64_t>(source_.size());
    found.clear();
    for (int32_t n = config_.max_ngram; n >= config_.min_ngram; --n) {
        if (total < n || static_cast<int32_t>(found.size()) >= limit) continue;
        const auto [first, last] = starts_.find(document_.data(), tail + tail_size - n, n);
        if (first == last) continue;
        // The starts nearest to (position - n) first, the smaller one on a tie, found from
        // the middle outwards.
        const int64_t target = static_cast<int64_t>(position_) - n;
        const int32_t* right = std::lower_bound(first, last, target,
                                                [](int32_t v, int64_t t) { return v < t; });
        const int32_t* left = right - 1;
        const bool has_left_end = right != first;
        bool left_valid = has_left_end;
        while (left_valid || right != last) {
            int32_t start;
            if (right == last || (left_valid && target - *left <= *right - target)) {
                start = *left;
                if (left == first) {
                    left_valid = false;
                } else {
                    --left;
                }
            } else {
                start = *right++;
            }
            const int32_t follow = start + n;
            if (follow < size && std::find(seen.begin(), seen.end(), follow) == seen.end()) {
                seen.push_back(follow);
                found.push_back(follow);
                if (static_cast<int32_t>(found.size()) >= limit) break;
            }
        }
    }
}

void RewriteDrafter::repeats(int32_t limit, std::vector<int32_t>& found) {
    found.clear();
    if (limit <= 0) return;
    const int32_t size = static_cast<int32_t>(output_.size());
    for (int32_t end = indexed_ + 1; end <= size; ++end) {
        for (int32_t n = config_.min_ngram; n <= std::min(config_.max_ngram, end); ++n) {
            written_.add(NgramKey::of(output_.data() + end - n, n), end - n);
        }
    }
    indexed_ = size;
    for (int32_t n = config_.max_ngram; n >= config_.min_ngram; --n) {
        if (size < n) continue;
        const NgramKey key = NgramKey::of(output_.data() + size - n, n);
        for (int32_t entry = written_.newest(key); entry != NgramChains::kNone;
             entry = written_.older(entry)) {
            const int32_t follow = written_.start(entry) + n;
            if (follow < size && std::find(found.begin(), found.end(), follow) == found.end()) {
                found.push_back(follow);
                if (static_cast<int32_t>(found.size()) == limit) return;
            }
        }
    }
}

const std::vector<Candidate>& RewriteDrafter::candidates(const int32_t* branch,
                                                         size_t branch_count) {
    candidates_.clear();
    std::vector<int32_t>& used = scratch_seen_;
    std::vector<int32_t>& found = scratch_found_;
    used.clear();
    const int32_t size = static_cast<int32_t>(source_.size());
    const auto& specs = config_.sources;
    for (int32_t offset = 0; offset < config_.aligned; ++offset) {
        const int32_t start = position_ + offset;
        if (start < size && std::find(used.begin(), used.end(), start) == used.end()) {
            used.push_back(start);
            candidates_.push_back(copy_of(Aligned, offset, start, specs[Aligned][offset].length));
        }
    }
    const int32_t total = static_cast<int32_t>(output_.size());
    const int32_t take = std::min(total, kMaxNgram);
    std::vector<int32_t> seen(used);
    anchors(output_.data() + total - take, take, total, config_.ngram, seen, found);
    for (size_t rank = 0; rank < found.size(); ++rank) {
        used.push_back(found[rank]);
        candidates_.push_back(copy_of(Ngram, static_cast<int32_t>(rank), found[rank],
                                      specs[Ngram][rank].length));
    }
    repeats(config_.output, found);
    for (size_t rank = 0; rank < found.size(); ++rank) {
        const int32_t length =
            std::min(specs[Output][rank].length, total - found[rank]);
        candidates_.push_back(
            {Output, static_cast<int32_t>(rank), -1, true, found[rank], std::max(length, 0)});
    }
    const size_t branches = std::min(branch_count, static_cast<size_t>(config_.top_k));
    std::array<int32_t, kMaxNgram> tail{};
    for (size_t rank = 0; rank < branches; ++rank) {
        const int32_t token = branch[rank];
        const int32_t keep = std::min(total, kMaxNgram - 1);
        std::copy(output_.end() - keep, output_.end(), tail.begin());
        tail[static_cast<size_t>(keep)] = token;
        std::vector<int32_t> fresh;
        anchors(tail.data(), keep + 1, total + 1, 1, fresh, found);
        const int32_t start = found.empty() ? position_ + 1 : found[0];
        Candidate copied = copy_of(TopK, static_cast<int32_t>(rank), start,
                                   specs[TopK][rank].length - 1);
        copied.lead = token;
        candidates_.push_back(copied);
    }
    return candidates_;
}

int32_t RewriteDrafter::token_at(const Candidate& candidate, int32_t index,
                                 int32_t& origin) const {
    if (candidate.lead >= 0) {
        if (index == 0) {
            origin = -1;
            return candidate.lead;
        }
        --index;
    }
    const int32_t at = candidate.start + index;
    if (candidate.from_output) {
        origin = -1;
        return output_[static_cast<size_t>(at)];
    }
    origin = at;
    return source_[static_cast<size_t>(at)];
}

void RewriteDrafter::materialize(const Candidate& candidate, std::vector<int32_t>& tokens,
                                 std::vector<int32_t>& origins) const {
    tokens.clear();
    origins.clear();
    const int32_t count = candidate.length + (candidate.lead >= 0 ? 1 : 0);
    for (int32_t i = 0; i < count; ++i) {
        int32_t origin;
        tokens.push_back(token_at(candidate, i, origin));
        origins.push_back(origin);
    }
}

void RewriteDrafter::merge(DraftTree& tree, const int32_t* known, size_t known_count,
                           int32_t max_depth) const {
    tree.assign_chain(known, known_count);
    const int32_t below = static_cast<int32_t>(known_count) - 1;
    for (const Candidate& candidate : candidates_) {
        const int32_t count = candidate.length + (candidate.lead >= 0 ? 1 : 0);
        const int32_t spec_length =
            config_.sources[static_cast<size_t>(candidate.kind)][static_cast<size_t>(candidate.rank)]
                .length;
        const int32_t limit = std::min({count, spec_length, max_depth});
        int32_t node = below;
        double reach = 1.0;
        for (int32_t depth = 1; depth <= limit; ++depth) {
            reach *= config_.rate(candidate.kind, candidate.rank, depth, copying_);
            int32_t origin;
            const int32_t token = token_at(candidate, depth - 1, origin);
            node = tree.add(node, token, reach);
            if (origin >= 0) tree.set_origin_if_unset(node, origin);
        }
    }
}

}  // namespace cad::drafting
