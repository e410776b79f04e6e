// Partition refinement over the elements 0..n-1, one set at a time, touching only each set's
// own members: the byte atoms (bytes parted by the terminals that hold them) and the LALR
// builder's shifts (a state's atoms parted by the terminals its items shift) both use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cad::cfg {

// The parts of the elements a round has met. Each set of the round splits every part it meets
// into its members and the rest, and its members no earlier set of the round held form one
// new part; so two met elements share a part exactly when every set of the round holds both
// or neither. Part ids are dense, 0 .. parts() - 1 (never more than the elements met), and a
// part wholly inside a set keeps its id.
class PartitionRefinement {
public:
    PartitionRefinement() = default;
    explicit PartitionRefinement(size_t elements)
        : part_(elements, 0),
          element_round_(elements, 0),
          size_(elements, 0),
          inside_(elements, 0),
          part_round_(elements, 0) {}

    // Starts a round: no element met, no part.
    void start() {
        ++round_;
        parts_ = 0;
    }

    // Refines the parts by ``members``, distinct elements.
    template <class Members>
    void refine(const Members& members) {
        ++set_round_;
        touched_.clear();
        int32_t newcomers = -1;  // the members no earlier set of the round held
        for (const auto member : members) {
            const size_t element = static_cast<size_t>(member);
            if (element_round_[element] != round_) {
                if (newcomers < 0) {
                    newcomers = parts_++;
                    size_[newcomers] = 0;
                }
                element_round_[element] = round_;
                part_[element] = newcomers;
                ++size_[newcomers];
                continue;
            }
            const int32_t old = part_[element];
            if (part_round_[old] != set_round_) {
                part_round_[old] = set_round_;
                inside_[old] = 0;
                touched_.push_back(old);
            }
            ++inside_[old];
        }
        if (touched_.empty()) return;
        for (const int32_t old : touched_) {  // inside_ becomes the id its members move to
            if (inside_[old] == size_[old]) {
                inside_[old] = old;
            } else {
                size_[old] -= inside_[old];
                size_[parts_] = inside_[old];
                inside_[old] = parts_++;
            }
        }
        for (const auto member : members) {
            const size_t element = static_cast<size_t>(member);
            if (part_[element] != newcomers) part_[element] = inside_[part_[element]];
        }
    }

    // Whether a set of this round held ``element``.
    bool met(size_t element) const { return element_round_[element] == round_; }
    // The part of ``element``, which this round has met.
    int32_t part(size_t element) const { return part_[element]; }
    int32_t parts() const { return parts_; }

private:
    std::vector<int32_t> part_;
    std::vector<uint32_t> element_round_;  // part_ is this round's when equal to round_
    std::vector<int32_t> size_;            // per part, its elements
    std::vector<int32_t> inside_;          // per part a set meets: its members in it, then their id
    std::vector<uint32_t> part_round_;     // inside_ is this set's when equal to set_round_
    std::vector<int32_t> touched_;
    int32_t parts_ = 0;
    uint32_t round_ = 0;
    uint32_t set_round_ = 0;
};

}  // namespace cad::cfg
