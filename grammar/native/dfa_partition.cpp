// Hopcroft's partition refinement over a refinable partition: every block is a range of one
// array of states, split in place by moving the states a splitter reaches to its front.
#include "dfa_partition.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace cad::cfg {

namespace {

class Refinement {
  public:
    Refinement(const std::vector<int32_t>& table, int32_t symbols, const std::vector<int32_t>& initial)
        : states_(static_cast<int32_t>(initial.size())), symbols_(symbols) {
        build_inverse(table);
        place_initial_blocks(initial);
    }

    std::vector<int32_t> run() {
        // Every (block, symbol) starts pending; any order reaches the same coarsest partition.
        for (int32_t block = 0; block < block_count(); ++block) {
            for (int32_t symbol = 0; symbol < symbols_; ++symbol) push(block, symbol);
        }
        std::vector<int32_t> splitter;
        while (!pending_.empty()) {
            const auto [block, symbol] = pending_.back();
            pending_.pop_back();
            is_pending_[static_cast<size_t>(block) * symbols_ + symbol] = 0;
            splitter.assign(elements_.begin() + first_[block], elements_.begin() + end_[block]);
            for (const int32_t target : splitter) {
                const size_t slot = static_cast<size_t>(symbol) * states_ + target;
                for (int32_t at = inverse_begin_[slot]; at < inverse_begin_[slot + 1]; ++at) mark(inverse_[at]);
            }
            split_touched();
        }
        return block_of_;
    }

  private:
    int32_t block_count() const { return static_cast<int32_t>(first_.size()); }

    // Sources of every (symbol, target), grouped by symbol then target.
    void build_inverse(const std::vector<int32_t>& table) {
        const size_t slots = static_cast<size_t>(symbols_) * states_;
        inverse_begin_.assign(slots + 1, 0);
        for (int32_t state = 0; state < states_; ++state) {
            for (int32_t symbol = 0; symbol < symbols_; ++symbol) {
                ++inverse_begin_[static_cast<size_t>(symbol) * states_ + target(table, state, symbol) + 1];
            }
        }
        for (size_t slot = 0; slot < slots; ++slot) inverse_begin_[slot + 1] += inverse_begin_[slot];
        inverse_.resize(static_cast<size_t>(inverse_begin_[slots]));
        std::vector<int32_t> filled(inverse_begin_.begin(), inverse_begin_.end() - 1);
        for (int32_t state = 0; state < states_; ++state) {
            for (int32_t symbol = 0; symbol < symbols_; ++symbol) {
                inverse_[filled[static_cast<size_t>(symbol) * states_ + target(table, state, symbol)]++] = state;
            }
        }
    }

    int32_t target(const std::vector<int32_t>& table, int32_t state, int32_t symbol) const {
        const int32_t found = table[static_cast<size_t>(state) * symbols_ + symbol];
        if (found < 0 || found >= states_) throw std::invalid_argument("a target is not a state");
        return found;
    }

    void place_initial_blocks(const std::vector<int32_t>& initial) {
        std::vector<int32_t> order(static_cast<size_t>(states_));
        for (int32_t state = 0; state < states_; ++state) order[state] = state;
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return initial[a] < initial[b]; });
        elements_ = order;
        location_.resize(static_cast<size_t>(states_));
        block_of_.resize(static_cast<size_t>(states_));
        for (int32_t at = 0; at < states_; ++at) {
            const int32_t state = elements_[at];
            location_[state] = at;
            if (at == 0 || initial[state] != initial[elements_[at - 1]]) {
                first_.push_back(at);
                end_.push_back(at);
                marked_end_.push_back(at);
            }
            block_of_[state] = block_count() - 1;
            ++end_.back();
        }
        is_pending_.assign(static_cast<size_t>(states_) * symbols_, 0);  // at most one block per state
    }

    void push(int32_t block, int32_t symbol) {
        char& flag = is_pending_[static_cast<size_t>(block) * symbols_ + symbol];
        if (flag) return;
        flag = 1;
        pending_.emplace_back(block, symbol);
    }

    // Moves ``state`` into the marked front of its block (once).
    void mark(int32_t state) {
        const int32_t block = block_of_[state];
        const int32_t at = location_[state];
        if (at < marked_end_[block]) return;
        if (marked_end_[block] == first_[block]) touched_.push_back(block);
        const int32_t front = marked_end_[block]++;
        const int32_t other = elements_[front];
        std::swap(elements_[front], elements_[at]);
        location_[state] = front;
        location_[other] = at;
    }

    // Splits every touched block into its marked and unmarked states (when both are there);
    // the smaller part becomes a new block. Hopcroft's rule for the splitters: where
    // (block, symbol) is pending, the new half becomes pending too; elsewhere the smaller
    // half does. The new half is the smaller, so it becomes pending for every symbol.
    void split_touched() {
        for (const int32_t block : touched_) {
            const int32_t middle = marked_end_[block];
            marked_end_[block] = first_[block];
            if (middle == end_[block]) continue;  // every state reached: no split
            const int32_t marked = middle - first_[block];
            const int32_t unmarked = end_[block] - middle;
            const int32_t created = block_count();
            if (marked <= unmarked) {
                first_.push_back(first_[block]);
                end_.push_back(middle);
                first_[block] = middle;
            } else {
                first_.push_back(middle);
                end_.push_back(end_[block]);
                end_[block] = middle;
            }
            marked_end_[block] = first_[block];
            marked_end_.push_back(first_.back());
            for (int32_t at = first_.back(); at < end_.back(); ++at) block_of_[elements_[at]] = created;
            for (int32_t symbol = 0; symbol < symbols_; ++symbol) push(created, symbol);
        }
        touched_.clear();
    }

    int32_t states_;
    int32_t symbols_;
    std::vector<int32_t> inverse_begin_;
    std::vector<int32_t> inverse_;
    std::vector<int32_t> elements_;    // states, each block a range of it
    std::vector<int32_t> location_;    // per state, its index in elements_
    std::vector<int32_t> block_of_;    // per state
    std::vector<int32_t> first_;       // per block, its range [first, end) of elements_
    std::vector<int32_t> end_;
    std::vector<int32_t> marked_end_;  // per block, the end of its marked front
    std::vector<int32_t> touched_;     // blocks with marked states
    std::vector<std::pair<int32_t, int32_t>> pending_;  // (block, symbol) splitters
    std::vector<char> is_pending_;     // per (block, symbol)
};

}  // namespace

std::vector<int32_t> coarsest_partition(const std::vector<int32_t>& table, int32_t symbols,
                                        const std::vector<int32_t>& initial) {
    if (symbols < 0 || table.size() != initial.size() * static_cast<size_t>(symbols)) {
        throw std::invalid_argument("the table needs one row of every symbol per state");
    }
    if (initial.empty()) return {};
    return Refinement(table, symbols, initial).run();
}

}  // namespace cad::cfg
