// The calibrated probabilities drafts are priced with (the compiled side of
// ``cad.selector.draft_config``): depth buckets, octave histograms and the program prior.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cad::drafting {

// Depths (and lengths) share probabilities in doubling buckets (1, 2, 3-4, 5-8, ...):
// ``0`` for 1, else ``ceil(log2(value))``.
inline int32_t depth_bucket(int64_t value) {
    if (value <= 1) return 0;
    int32_t bits = 0;
    for (uint64_t rest = static_cast<uint64_t>(value - 1); rest; rest >>= 1) ++bits;
    return bits;
}

// The probability of ``value`` under a histogram over doubling buckets, spread evenly inside
// its bucket; 0 beyond the table.
inline double octave_share(const std::vector<double>& table, int64_t value) {
    const int32_t bucket = depth_bucket(value);
    if (bucket >= static_cast<int32_t>(table.size())) return 0.0;
    const double width = bucket == 0 ? 1.0 : static_cast<double>(uint64_t{1} << (bucket - 1));
    return table[static_cast<size_t>(bucket)] / width;
}

constexpr int kStartReach = 3;  // start-line offsets priced one by one: -3 .. 3

enum Previous : int32_t { AfterStart = 0, AfterCopy = 1, AfterGen = 2, PastEnd = 3 };
enum NextKind : int32_t { NextCopy = 0, NextGen = 1, NextEnd = 2 };

// ``cad.selector.draft_config.ProgramPrior`` (its docstring describes every field).
struct ProgramPrior {
    std::array<std::array<double, 3>, 4> next_op{};
    std::vector<double> start_offsets;
    std::vector<double> skip_lengths;
    double to_end = 0.0;
    std::vector<double> copy_lengths;
    double gen_close = 0.5;
    double body_rate = 1.0;
    double min_reach = 0.0;
    double follow_reach = 0.0;
    std::array<double, 2> line_shares{};
    std::array<double, 2> resume_shares{};
    std::array<double, 7> skip_shares{};
    double anchor_share = 0.0;
    double repeat_share = 0.0;
    double follow_discount = 1.0;
    int32_t follow_ops = 0;

    double start_line_mass(int64_t cursor, int64_t start, bool after_copy) const {
        const int64_t offset = start - cursor;
        if (after_copy) return offset >= 1 ? octave_share(skip_lengths, offset) : 0.0;
        if (offset >= -kStartReach && offset <= kStartReach) {
            return start_offsets[static_cast<size_t>(offset + kStartReach)];
        }
        if (offset < 0) return 0.0;
        double priced = 0.0;
        for (double share : start_offsets) priced += share;
        return (1.0 - priced) * octave_share(skip_lengths, offset - kStartReach);
    }
    double end_line_mass(int64_t start, int64_t end, int64_t n_lines) const {
        if (end == n_lines) return to_end;
        return (1.0 - to_end) * octave_share(copy_lengths, end - start + 1);
    }
};

}  // namespace cad::drafting
