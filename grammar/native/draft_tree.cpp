#include "draft_tree.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <stdexcept>

namespace cad::drafting {

void ChildIndex::clear() {
    size_ = 0;
    if (++generation_ == 0) {
        for (Slot& slot : slots_) slot.generation = 0;
        generation_ = 1;
    }
}

int32_t ChildIndex::find(int32_t parent, int32_t token) const {
    const uint64_t key = key_of(parent, token);
    const size_t mask = slots_.size() - 1;
    for (size_t at = slot_of(key);; at = (at + 1) & mask) {
        const Slot& slot = slots_[at];
        if (slot.generation != generation_) return -1;
        if (slot.key == key) return slot.value;
    }
}

void ChildIndex::insert(int32_t parent, int32_t token, int32_t child) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const uint64_t key = key_of(parent, token);
    const size_t mask = slots_.size() - 1;
    size_t at = slot_of(key);
    while (slots_[at].generation == generation_) at = (at + 1) & mask;
    slots_[at] = {key, child, generation_};
    ++size_;
}

void ChildIndex::grow() {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
        if (slot.generation != generation_) continue;
        size_t at = slot_of(slot.key);
        while (slots_[at].generation == generation_) at = (at + 1) & mask;
        slots_[at] = slot;
    }
}

void DraftTree::clear() {
    tokens_.clear();
    parents_.clear();
    depths_.clear();
    reach_.clear();
    origins_.clear();
    first_child_.clear();
    last_child_.clear();
    next_sibling_.clear();
    child_count_.clear();
    index_.clear();
}

int32_t DraftTree::add(int32_t parent, int32_t token, double reach) {
    if (parent >= 0) {
        const int32_t existing = index_.find(parent, token);
        if (existing >= 0) {
            reach_[existing] = std::max(reach_[existing], reach);
            return existing;
        }
    }
    return append(parent, token, reach);
}

int32_t DraftTree::append(int32_t parent, int32_t token, double reach) {
    const int32_t node = size();
    tokens_.push_back(token);
    parents_.push_back(parent);
    depths_.push_back(parent < 0 ? 0 : depths_[parent] + 1);
    reach_.push_back(reach);
    origins_.push_back(-1);
    first_child_.push_back(-1);
    last_child_.push_back(-1);
    next_sibling_.push_back(-1);
    child_count_.push_back(0);
    if (parent >= 0) {
        if (last_child_[parent] < 0) {
            first_child_[parent] = node;
        } else {
            next_sibling_[last_child_[parent]] = node;
        }
        last_child_[parent] = node;
        ++child_count_[parent];
        index_.insert(parent, token, node);
    }
    return node;
}

void DraftTree::assign_chain(const int32_t* tokens, size_t count) {
    clear();
    for (size_t i = 0; i < count; ++i) append(static_cast<int32_t>(i) - 1, tokens[i], 1.0);
}

double geometric_mean(const double* values, size_t count) {
    if (count == 0) return 0.0;
    double total = 0.0;
    for (size_t i = 0; i < count; ++i) {
        if (values[i] <= 0.0) return 0.0;
    }
    for (size_t i = 0; i < count; ++i) total += std::log(values[i]);
    return std::exp(total / static_cast<double>(count));
}

double DraftTree::score(int32_t node, const std::vector<int64_t>* child_states) const {
    const double own = reach_[node];
    thread_local std::vector<double> kids;
    kids.clear();
    size_t at = 0;
    for (int32_t c = first_child_[node]; c >= 0; c = next_sibling_[c], ++at) {
        if (child_states != nullptr && (*child_states)[at] < 0) continue;
        kids.push_back(reach_[c]);
    }
    if (kids.empty()) return own;
    const double pair[2] = {own, geometric_mean(kids.data(), kids.size())};
    return geometric_mean(pair, 2);
}

namespace {

struct Offer {
    double negative_score;
    int32_t node;
    int32_t parent;
    int64_t state;
};

// Python's heapq order over (-score, node, parent): the best score first, ties by node.
struct Later {
    bool operator()(const Offer& a, const Offer& b) const {
        if (a.negative_score != b.negative_score) return a.negative_score > b.negative_score;
        return a.node > b.node;
    }
};

}  // namespace

void DraftTree::prune(int32_t budget, double min_reach, int32_t required, DraftTree& kept,
                      std::vector<int32_t>& sources, StateOracle* oracle, int64_t chain_state,
                      std::vector<int64_t>* states) const {
    if (required < 1 || required > size()) {
        throw std::invalid_argument("the required nodes must be a chain from the root");
    }
    for (int32_t node = 0; node < required; ++node) {
        if (parents_[node] != node - 1) {
            throw std::invalid_argument("the required nodes must be a chain from the root");
        }
    }
    kept.clear();
    sources.clear();
    if (states != nullptr) states->clear();
    for (int32_t node = 0; node < required; ++node) {
        const int32_t copy = kept.append(node - 1, tokens_[node], reach_[node]);
        kept.origins_[copy] = origins_[node];
        sources.push_back(node);
        if (states != nullptr) states->push_back(chain_state);
    }
    std::priority_queue<Offer, std::vector<Offer>, Later> frontier;
    std::vector<int64_t> grandchildren;
    auto offer = [&](int32_t source, int32_t parent, int64_t state) {
        for (int32_t c = first_child_[source]; c >= 0; c = next_sibling_[c]) {
            if (reach_[c] < min_reach) continue;
            int64_t child_state = 0;
            const std::vector<int64_t>* allowed = nullptr;
            if (oracle != nullptr) {
                child_state = oracle->step(state, tokens_[c]);
                if (child_state < 0) continue;
                grandchildren.clear();
                for (int32_t g = first_child_[c]; g >= 0; g = next_sibling_[g]) {
                    grandchildren.push_back(oracle->step(child_state, tokens_[g]));
                }
                allowed = &grandchildren;
            }
            frontier.push({-score(c, allowed), c, parent, child_state});
        }
    };
    offer(required - 1, required - 1, chain_state);
    while (!frontier.empty() && kept.size() < required + budget) {
        const Offer best = frontier.top();
        frontier.pop();
        const int32_t copy = kept.append(best.parent, tokens_[best.node], reach_[best.node]);
        kept.origins_[copy] = origins_[best.node];
        sources.push_back(best.node);
        if (states != nullptr) states->push_back(best.state);
        offer(best.node, copy, best.state);
    }
}

void DraftTree::fill_mask(float* out, int64_t past, float blocked, int32_t first) const {
    const int64_t n = size() - first;
    const int64_t width = past + n;
    for (int64_t i = 0; i < n; ++i) {
        float* row = out + i * width;
        std::memset(row, 0, static_cast<size_t>(past) * sizeof(float));
        float* tree = row + past;
        const int64_t p = static_cast<int64_t>(parents_[static_cast<size_t>(first + i)]) - first;
        if (p >= 0) {
            std::memcpy(tree, out + p * width + past, static_cast<size_t>(n) * sizeof(float));
        } else {
            std::fill(tree, tree + n, blocked);
        }
        tree[i] = 0.0f;
    }
}

}  // namespace cad::drafting
