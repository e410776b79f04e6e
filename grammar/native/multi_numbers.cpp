// The numbers of a multi-file program: a copy's lines and columns, held to the file the copy
// takes from, and file ids, held to the files a copy, an edit or a deletion may name.
#include <algorithm>
#include <stdexcept>

#include "multi_detail.h"
#include "multi_states.h"

namespace cad::program {

std::pair<uint64_t, uint64_t> MultiStructure::line_bounds(const MState& state) const {
    if (shape_) return {1, kUnbounded};
    const uint32_t source = state.file ? state.file : state.own;
    const std::vector<uint64_t>& widths = files_.at(source - 1).widths;
    const uint64_t n = widths.size();
    const auto& values = state.values;
    if (state.field == Field::Lines) return {state.field_count ? values[0] : 1, n};
    switch (state.field_count) {
        case 0:
            return {1, n};
        case 1:
            return {1, widths[values[0] - 1]};
        case 2:
            return {values[0], n};
        default:
            return {values[2] == values[0] ? values[1] : 1, widths[values[2] - 1]};
    }
}

bool MultiStructure::file_allowed(const MState& state, uint64_t value) const {
    if (shape_) return value >= 1 && value <= kUnbounded;
    if (value < 1 || value > files_.size()) return false;
    if (state.field == Field::CopyFile) return value != state.own && lines_of(value) > 0;
    return editable_[value - 1] && !file_named_[value];
}

bool MultiStructure::any_file_in(const MState& state, uint64_t low, uint64_t high) const {
    if (shape_) return low <= kUnbounded && high >= 1;
    if (state.field == Field::CopyFile) {
        auto it = std::lower_bound(copyable_.begin(), copyable_.end(), low);
        if (it != copyable_.end() && *it == state.own) ++it;
        return it != copyable_.end() && *it <= high;
    }
    const uint64_t last = std::min<uint64_t>(high, files_.size());
    for (uint64_t value = std::max<uint64_t>(low, 1); value <= last; ++value) {
        if (file_allowed(state, value)) return true;
    }
    return false;
}

std::vector<std::pair<uint64_t, uint64_t>> MultiStructure::file_runs(const MState& state) const {
    std::vector<std::pair<uint64_t, uint64_t>> runs;
    for (uint64_t value = 1; value <= files_.size(); ++value) {
        if (!file_allowed(state, value)) continue;
        if (!runs.empty() && runs.back().second + 1 == value) {
            runs.back().second = value;
        } else {
            runs.push_back({value, value});
        }
    }
    return runs;
}

uint64_t MultiStructure::largest_file(const MState& state) const {
    for (uint64_t value = files_.size(); value >= 1; --value) {
        if (file_allowed(state, value)) return value;
    }
    return 0;
}

uint64_t MultiStructure::number_width(const MState& state) const {
    if (!is_file_field(state.field)) return decimal_length(line_bounds(state).second);
    if (shape_) return decimal_length(kUnbounded);
    const uint64_t largest = largest_file(state);
    return largest ? decimal_length(largest) : 0;
}

bool MultiStructure::number_prefix(const MState& state, uint64_t value, int count) const {
    if (!is_file_field(state.field)) {
        const auto [low, high] = line_bounds(state);
        return number_prefix_ok(value, count, low, high);
    }
    uint64_t smallest = 1;
    for (int i = 1; i < count; ++i) smallest *= 10;
    if (count == 0 || value < smallest) return false;
    const int width = static_cast<int>(number_width(state));
    unsigned __int128 scale = 1;
    for (int extra = 0; extra <= width - count; ++extra, scale *= 10) {
        const unsigned __int128 low = value * scale;
        const unsigned __int128 high = (value + 1) * scale - 1;
        if (low > kUnbounded) break;
        const uint64_t capped = high > kUnbounded ? kUnbounded : static_cast<uint64_t>(high);
        if (any_file_in(state, static_cast<uint64_t>(low), capped)) return true;
    }
    return false;
}

bool MultiStructure::number_done(const MState& state, uint64_t value) const {
    if (is_file_field(state.field)) return file_allowed(state, value);
    const auto [low, high] = line_bounds(state);
    return low <= value && value <= high;
}

std::optional<MStep> MultiStructure::number_step(const MState& state, uint8_t byte) const {
    if (byte >= '0' && byte <= '9') {
        if (state.digit_count >= number_width(state)) return std::nullopt;
        const uint64_t grown = state.digits * 10 + (byte - '0');
        if (!number_prefix(state, grown, state.digit_count + 1)) return std::nullopt;
        MState next = state;
        next.digits = grown;
        ++next.digit_count;
        return MStep{next, false};
    }
    if (state.digit_count == 0 || !number_done(state, state.digits)) return std::nullopt;
    const bool lines = state.field == Field::Lines;
    const int count = is_file_field(state.field) ? 0 : (lines ? 1 : 3);
    const uint8_t delimiter =
        state.field_count < count ? static_cast<uint8_t>((lines ? "-" : ":-:")[state.field_count])
                                  : '"';
    if (byte != delimiter) return std::nullopt;
    MState next = state;
    next.values[state.field_count] = state.digits;
    next.field_count = state.field_count + 1;
    next.digits = 0;
    next.digit_count = 0;
    if (byte != '"') return MStep{next, false};
    switch (state.field) {
        case Field::CopyFile: {
            MState attr = literal_in(next, MLiteral::AttrLines);
            attr.file = static_cast<uint32_t>(state.digits);
            attr.field_count = 0;
            attr.values = {};
            return MStep{attr, false};
        }
        case Field::EditFile:
            return MStep{literal_in(next, MLiteral::EditTail), false};
        case Field::DeleteFile:
            return MStep{literal_in(next, MLiteral::DeleteTail), false};
        default:
            return MStep{literal_in(next, MLiteral::CopyTail), false};
    }
}

std::string MultiStructure::number_completion(const MState& state) const {
    const uint8_t quote = '"';
    if (is_file_field(state.field)) {
        const std::string digits = state.digit_count ? std::to_string(state.digits) : "";
        for (const auto& [low, high] : file_runs(state)) {
            for (uint64_t value = low; value <= high; ++value) {
                const std::string text = std::to_string(value);
                if (text.compare(0, digits.size(), digits) != 0) continue;
                const std::string suffix = text.substr(digits.size());
                return suffix.empty() ? std::string(1, static_cast<char>(quote)) : suffix;
            }
        }
        throw std::logic_error("file number state has no completion");
    }
    const auto [low, high] = line_bounds(state);
    std::optional<std::string> suffix =
        smallest_number_suffix(state.digits, state.digit_count, low, high);
    if (!suffix) throw std::logic_error("number state has no completion");
    if (state.field == Field::Span && state.field_count == 2) {
        const std::string digits = state.digit_count ? std::to_string(state.digits) : std::string();
        if (std::stoull(digits + *suffix) == state.values[0]) {
            const std::optional<std::string> later =
                smallest_number_suffix(state.digits, state.digit_count, state.values[0] + 1, high);
            if (later && later->size() + 1 <
                             suffix->size() + std::to_string(state.values[1]).size()) {
                suffix = later;
            }
        }
    }
    if (!suffix->empty()) return *suffix;
    const bool lines = state.field == Field::Lines;
    const int count = lines ? 1 : 3;
    return std::string(
        1, state.field_count < count ? (lines ? "-" : ":-:")[state.field_count] : '"');
}

}  // namespace cad::program
