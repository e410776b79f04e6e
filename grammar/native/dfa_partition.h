// The coarsest partition of a DFA's states that keeps given classes apart (the native form
// of ``char_automata._hopcroft``, which stays the reference of the differential tests).
#pragma once

#include <cstdint>
#include <vector>

namespace cad::cfg {

// ``table`` is ``states x symbols`` targets, row by row (every target a state: a missing
// move goes to a dead state that is one of the states); ``initial`` gives every state a
// class (what the partition must keep apart, e.g. its tags). The result gives every state
// its block: two states share one exactly when no string leads them to different classes.
// Hopcroft's partition refinement, O(symbols * states * log states).
std::vector<int32_t> coarsest_partition(const std::vector<int32_t>& table, int32_t symbols,
                                        const std::vector<int32_t>& initial);

}  // namespace cad::cfg
