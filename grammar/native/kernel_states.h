// The states of an LR automaton under construction, identified by their kernels: every
// kernel in one flat array (state s has items [begin(s), end(s))) and an open-addressing
// table of state ids over it, so neither a lookup nor a new state allocates per kernel.
// ``Item`` is a core (LR(0)) or a (core, lookahead set) pair (canonical LR(1)).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "lr1.h"

namespace cad::cfg {

template <class Item>
class KernelStates {
  public:
    explicit KernelStates(int32_t max_states) : max_states_(max_states) {}

    int32_t count() const { return static_cast<int32_t>(begin_.size() - 1); }
    const Item* begin(int32_t state) const { return items_.data() + begin_[state]; }
    const Item* end(int32_t state) const { return items_.data() + begin_[state + 1]; }

    // The state whose kernel is ``kernel`` (sorted, so equal kernels are equal arrays;
    // ``hash`` its hash), a new one if there is none; NotLr1 past ``max_states``.
    int32_t state_of(const std::vector<Item>& kernel, size_t hash) {
        size_t mask = slots_.size() - 1;
        size_t at = hash & mask;
        for (; slots_[at] >= 0; at = (at + 1) & mask) {
            const int32_t state = slots_[at];
            if (static_cast<size_t>(end(state) - begin(state)) == kernel.size() &&
                std::equal(kernel.begin(), kernel.end(), begin(state))) {
                return state;
            }
        }
        const int32_t id = count();
        if (id >= max_states_) {
            throw NotLr1("more than " + std::to_string(max_states_) + " LR(1) states");
        }
        items_.insert(items_.end(), kernel.begin(), kernel.end());
        begin_.push_back(static_cast<uint32_t>(items_.size()));
        slots_[at] = id;
        hashes_.push_back(hash);
        if (2 * hashes_.size() > slots_.size()) {
            slots_.assign(2 * slots_.size(), -1);
            mask = slots_.size() - 1;
            for (size_t state = 0; state < hashes_.size(); ++state) {
                at = hashes_[state] & mask;
                while (slots_[at] >= 0) at = (at + 1) & mask;
                slots_[at] = static_cast<int32_t>(state);
            }
        }
        return id;
    }

  private:
    int32_t max_states_;
    std::vector<Item> items_;
    std::vector<uint32_t> begin_{0};
    std::vector<int32_t> slots_ = std::vector<int32_t>(1024, -1);
    std::vector<size_t> hashes_;
};

}  // namespace cad::cfg
