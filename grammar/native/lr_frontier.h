// The order in which masks of an LR(1) grammar are precomputed: its states breadth-first
// from the start state over shifts and gotos (the states a decode reaches first come first),
// except that a jump puts the states near a given one first (where a decode has just found a
// state not yet built: the states it is about to reach).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "lr1.h"

namespace cad::cfg {

class LrFrontier {
  public:
    static constexpr size_t kJumpAhead = 64;  // states a jump looks at, breadth-first

    explicit LrFrontier(const LrTables& tables)
        : tables_(tables), queued_(static_cast<size_t>(tables.states), 0),
          visited_(static_cast<size_t>(tables.states), 0) {
        if (tables.states > 0) enqueue_back(0);
    }

    // The next state not yet visited, or -1 when every state reachable from the start has
    // been; the state's successors join the back of the queue.
    int32_t next() {
        while (!queue_.empty()) {
            const int32_t state = queue_.front();
            queue_.pop_front();
            if (visited_[static_cast<size_t>(state)]) continue;
            visited_[static_cast<size_t>(state)] = 1;
            for (int32_t target : successors(state)) {
                if (!queued_[static_cast<size_t>(target)]) enqueue_back(target);
            }
            return state;
        }
        return -1;
    }

    // Visit the states not yet visited among the kJumpAhead nearest to ``state`` (itself
    // included, breadth-first) before any other.
    void jump_to(int32_t state) {
        std::vector<int32_t> near{state};
        std::vector<uint8_t> seen(visited_.size(), 0);
        seen[static_cast<size_t>(state)] = 1;
        for (size_t next = 0; next < near.size() && near.size() < kJumpAhead; ++next) {
            for (int32_t target : successors(near[next])) {
                if (seen[static_cast<size_t>(target)] || near.size() >= kJumpAhead) continue;
                seen[static_cast<size_t>(target)] = 1;
                near.push_back(target);
            }
        }
        for (auto it = near.rbegin(); it != near.rend(); ++it) {
            if (visited_[static_cast<size_t>(*it)]) continue;
            queued_[static_cast<size_t>(*it)] = 1;
            queue_.push_front(*it);
        }
    }

    // The states with a shift or a goto into ``state``: those that can lie just below it on
    // a stack (computed for every state on first use).
    const std::vector<int32_t>& predecessors(int32_t state) {
        if (predecessors_.empty()) {
            predecessors_.resize(static_cast<size_t>(tables_.states));
            for (int32_t from = 0; from < tables_.states; ++from) {
                for (int32_t target : successors(from)) {
                    std::vector<int32_t>& list = predecessors_[static_cast<size_t>(target)];
                    if (list.empty() || list.back() != from) list.push_back(from);
                }
            }
        }
        return predecessors_[static_cast<size_t>(state)];
    }

  private:
    // The distinct targets of ``state``'s shifts (by atom) and gotos (by nonterminal).
    std::vector<int32_t> successors(int32_t state) const {
        std::vector<int32_t> targets;
        auto add = [&targets](int32_t target) {
            if (target < 0) return;
            for (int32_t seen : targets) {
                if (seen == target) return;
            }
            targets.push_back(target);
        };
        for (int32_t atom = 0; atom < tables_.atoms.end_atom; ++atom) add(tables_.act(state, atom));
        for (int32_t symbol = 0; symbol < tables_.nonterminals; ++symbol) add(tables_.go(state, symbol));
        return targets;
    }

    void enqueue_back(int32_t state) {
        queued_[static_cast<size_t>(state)] = 1;
        queue_.push_back(state);
    }

    const LrTables& tables_;
    std::vector<uint8_t> queued_;
    std::vector<uint8_t> visited_;
    std::deque<int32_t> queue_;
    std::vector<std::vector<int32_t>> predecessors_;
};

}  // namespace cad::cfg
