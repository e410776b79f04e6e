#include "program_states.h"

#include "utf8.h"

#include <algorithm>
#include <stdexcept>

namespace cad::program {

const std::array<std::string, kOpeners> kOpenerText = {"<copy lines=\"", "<copy span=\"", "<gen>",
                                                       "</program>"};

namespace {

const std::string kGenClose = "</gen>";
const std::array<std::string, 2> kLiteralText = {"/>\n", "\n"};

uint64_t pow10(int exponent) {
    uint64_t result = 1;
    for (int i = 0; i < exponent; ++i) result *= 10;
    return result;
}

State await_state(const std::string& prefix) {
    State state;
    for (int opener = 0; opener < kOpeners; ++opener) {
        if (kOpenerText[opener].compare(0, prefix.size(), prefix) == 0) {
            state.opener = static_cast<uint8_t>(opener);
            break;
        }
    }
    state.length = static_cast<uint8_t>(prefix.size());
    return state;
}

State number_state(Kind kind, int field_count, const std::array<uint64_t, 4>& values,
                   int digit_count, uint64_t digits) {
    State state;
    state.mode = Mode::Number;
    state.kind = kind;
    state.field_count = static_cast<uint8_t>(field_count);
    for (int i = 0; i < field_count; ++i) state.values[i] = values[i];
    state.digit_count = static_cast<uint8_t>(digit_count);
    state.digits = digits;
    return state;
}

State literal_state(LiteralId literal, int length, Kind kind, int field_count,
                    const std::array<uint64_t, 4>& values) {
    State state;
    state.mode = Mode::Literal;
    state.literal = literal;
    state.length = static_cast<uint8_t>(length);
    state.kind = kind;
    state.field_count = static_cast<uint8_t>(field_count);
    for (int i = 0; i < field_count; ++i) state.values[i] = values[i];
    return state;
}

State gen_state(uint8_t pending, uint8_t matched) {
    State state;
    state.mode = Mode::Gen;
    state.pending = pending;
    state.matched = matched;
    return state;
}

State end_state() {
    State state;
    state.mode = Mode::End;
    return state;
}

std::string smallest_continuation(uint8_t pending) {
    std::string completion;
    while (pending) {
        completion.push_back(static_cast<char>(kUtf8Continuation[pending].low));
        pending = kUtf8Continuation[pending].then;
    }
    return completion;
}

}  // namespace

bool State::operator==(const State& other) const {
    return mode == other.mode && opener == other.opener && length == other.length &&
           literal == other.literal && pending == other.pending && matched == other.matched &&
           kind == other.kind && field_count == other.field_count &&
           digit_count == other.digit_count && digits == other.digits && values == other.values;
}

int shape_slot(const State& state) {
    switch (state.mode) {
        case Mode::Await:
            return state.opener * 16 + state.length;
        case Mode::Number:
            return 64 + static_cast<int>(state.kind) * 8 + state.field_count * 2 +
                   (state.digit_count > 0 ? 1 : 0);
        case Mode::Literal:
            return 80 + static_cast<int>(state.literal) * 4 + state.length;
        case Mode::End:
            return 88;
        case Mode::Gen:
            break;
    }
    return -1;
}

int decimal_length(uint64_t value) {
    int length = 1;
    while (value >= 10) {
        value /= 10;
        ++length;
    }
    return length;
}

std::optional<uint8_t> utf8_step(uint8_t pending, uint8_t byte) {
    const int next = utf8_next(pending, byte);
    if (next == kUtf8Invalid) return std::nullopt;
    return static_cast<uint8_t>(next);
}

bool number_prefix_ok(uint64_t value, int count, uint64_t low, uint64_t high) {
    if (count == 0 || low > high || value < pow10(count - 1)) return false;
    for (int extra = 0; extra <= decimal_length(high) - count; ++extra) {
        const unsigned __int128 scale = pow10(extra);
        if (value * scale <= high && (value + 1) * scale - 1 >= low) return true;
    }
    return false;
}

std::optional<std::string> smallest_number_suffix(uint64_t value, int count, uint64_t low,
                                                  uint64_t high) {
    if (count == 0) {
        if (low <= high) return std::to_string(low);
        return std::nullopt;
    }
    if (value < pow10(count - 1) || value > high) return std::nullopt;
    if (low <= value) return std::string();
    for (int extra = 1; extra <= decimal_length(high) - count; ++extra) {
        const unsigned __int128 scale = pow10(extra);
        const unsigned __int128 smallest = std::max<unsigned __int128>(low, value * scale);
        const unsigned __int128 largest =
            std::min<unsigned __int128>(high, (value + 1) * scale - 1);
        if (smallest <= largest) {
            return std::to_string(static_cast<uint64_t>(smallest)).substr(count);
        }
    }
    return std::nullopt;
}

Structure::Structure(std::vector<uint64_t> widths, bool bounded, bool subline, bool copies)
    : widths_(std::move(widths)),
      bounded_(bounded),
      subline_(subline),
      lines_(bounded ? widths_.size() : kUnbounded) {
    copies_ = copies && lines_ > 0;
    enabled_[GenOpen] = true;
    enabled_[ProgramEnd] = true;
    enabled_[CopyLines] = copies_;
    enabled_[CopySpan] = copies_ && subline;
}

std::pair<uint64_t, uint64_t> Structure::bounds(Kind kind, int field_count,
                                                const std::array<uint64_t, 4>& values) const {
    if (!bounded_) return {1, kUnbounded};
    const uint64_t n = lines_;
    if (kind == Kind::Lines) return field_count ? std::make_pair(values[0], n) : std::make_pair(uint64_t{1}, n);
    switch (field_count) {
        case 0:
            return {1, n};
        case 1:
            return {1, widths_[values[0] - 1]};
        case 2:
            return {values[0], n};
        default:
            return {values[2] == values[0] ? values[1] : 1, widths_[values[2] - 1]};
    }
}

uint8_t Structure::delimiter(Kind kind, int field_index) {
    const char* delimiters = kind == Kind::Lines ? "-" : ":-:";
    const int count = kind == Kind::Lines ? 1 : 3;
    return static_cast<uint8_t>(field_index < count ? delimiters[field_index] : '"');
}

std::optional<Step> Structure::step(const State& state, uint8_t byte) const {
    switch (state.mode) {
        case Mode::Gen: {
            const std::optional<uint8_t> after = utf8_step(state.pending, byte);
            if (!after) return std::nullopt;
            if (byte == static_cast<uint8_t>(kGenClose[state.matched])) {
                if (state.matched + 1u == kGenClose.size()) {
                    return Step{literal_state(LiteralId::GenNewline, 0, Kind::Lines, 0, {}), false};
                }
                return Step{gen_state(*after, state.matched + 1), false};
            }
            return Step{gen_state(*after, byte == '<' ? 1 : 0), false};
        }
        case Mode::Number:
            return number_step(state, byte);
        case Mode::Literal: {
            const std::string& text = kLiteralText[static_cast<int>(state.literal)];
            if (byte != static_cast<uint8_t>(text[state.length])) return std::nullopt;
            if (state.length + 1u < text.size()) {
                State next = state;
                ++next.length;
                return Step{next, false};
            }
            return Step{State{}, true};
        }
        case Mode::Await:
            return await_step(state, byte);
        case Mode::End:
            break;
    }
    return std::nullopt;
}

std::optional<Step> Structure::await_step(const State& state, uint8_t byte) const {
    // The prefix read so far is kOpenerText[state.opener] cut to state.length; grown by
    // ``byte`` it is compared with each opener in place (no string is built: the drafter and
    // the forced-literal search step here for every byte they try).
    const std::string& read = kOpenerText[state.opener];
    const size_t length = state.length;
    const auto grows_into = [&](const std::string& text) {
        return text.size() > length && text.compare(0, length, read, 0, length) == 0 &&
               static_cast<uint8_t>(text[length]) == byte;
    };
    bool prefix_of_enabled = false;
    int first_grown = -1;
    for (int opener = 0; opener < kOpeners; ++opener) {
        if (!grows_into(kOpenerText[opener])) continue;
        if (first_grown < 0) first_grown = opener;
        if (!enabled_[opener]) continue;
        const std::string& text = kOpenerText[opener];
        if (text.size() == length + 1) {
            switch (opener) {
                case GenOpen:
                    return Step{gen_state(0, 0), false};
                case ProgramEnd:
                    return Step{end_state(), false};
                case CopyLines:
                    return Step{number_state(Kind::Lines, 0, {}, 0, 0), false};
                default:
                    return Step{number_state(Kind::Span, 0, {}, 0, 0), false};
            }
        }
        prefix_of_enabled = true;
    }
    if (!prefix_of_enabled) return std::nullopt;
    State next;
    next.opener = static_cast<uint8_t>(first_grown);
    next.length = static_cast<uint8_t>(length + 1);
    return Step{next, false};
}

std::optional<Step> Structure::number_step(const State& state, uint8_t byte) const {
    const auto [low, high] = bounds(state.kind, state.field_count, state.values);
    if (byte >= '0' && byte <= '9') {
        if (state.digit_count >= decimal_length(high)) return std::nullopt;
        const uint64_t grown = state.digits * 10 + (byte - '0');
        if (!number_prefix_ok(grown, state.digit_count + 1, low, high)) return std::nullopt;
        State next = state;
        next.digits = grown;
        ++next.digit_count;
        return Step{next, false};
    }
    if (state.digit_count == 0 || state.digits < low || state.digits > high) return std::nullopt;
    if (byte != delimiter(state.kind, state.field_count)) return std::nullopt;
    std::array<uint64_t, 4> finished = state.values;
    finished[state.field_count] = state.digits;
    const int field_count = state.field_count + 1;
    if (byte != '"') return Step{number_state(state.kind, field_count, finished, 0, 0), false};
    return Step{literal_state(LiteralId::CopyTail, 0, state.kind, field_count, finished), false};
}

std::optional<State> Structure::walk(State state, const char* data, size_t size,
                                     bool cross_ops) const {
    for (size_t position = 0; position < size; ++position) {
        const std::optional<Step> stepped = step(state, static_cast<uint8_t>(data[position]));
        if (!stepped) return std::nullopt;
        state = stepped->state;
        if (stepped->op_ended && !cross_ops && position + 1 < size) return std::nullopt;
    }
    return state;
}

std::string Structure::forced(State state) const {
    std::string forced;
    // Only these bytes can ever step a state of each mode: an opener's next byte, a digit or
    // a number's delimiter, the literal's next byte (a gen body ends the search; nothing
    // follows the end).
    static const std::string kNumberBytes = "0123456789-:\"";
    std::string candidates;
    while (state.mode != Mode::Gen && state.mode != Mode::End) {
        candidates.clear();
        if (state.mode == Mode::Number) {
            candidates = kNumberBytes;
        } else if (state.mode == Mode::Literal) {
            candidates.push_back(kLiteralText[static_cast<int>(state.literal)][state.length]);
        } else {
            for (const std::string& text : kOpenerText) {
                if (text.size() > state.length) candidates.push_back(text[state.length]);
            }
        }
        const std::optional<uint8_t> only = only_accepted_byte(
            candidates, [&](uint8_t byte) { return step(state, byte).has_value(); });
        if (!only) break;
        forced.push_back(static_cast<char>(*only));
        const Step stepped = *step(state, *only);
        state = stepped.state;
        if (stepped.op_ended) break;
    }
    return forced;
}

std::string Structure::completion(State state) const {
    std::string completion;
    while (state.mode != Mode::End) {
        const std::string chunk = completion_chunk(state);
        const std::optional<State> next = walk(state, chunk.data(), chunk.size(), true);
        if (!next || chunk.empty()) throw std::logic_error("program completion failed");
        state = *next;
        completion += chunk;
    }
    return completion;
}

std::string Structure::completion_chunk(const State& state) const {
    switch (state.mode) {
        case Mode::Gen:
            return state.pending ? smallest_continuation(state.pending)
                                 : kGenClose.substr(state.matched);
        case Mode::Number:
            return number_completion(state);
        case Mode::Literal:
            return kLiteralText[static_cast<int>(state.literal)].substr(state.length);
        case Mode::Await: {
            const std::string prefix = kOpenerText[state.opener].substr(0, state.length);
            for (int opener : {ProgramEnd, CopyLines, GenOpen, CopySpan}) {
                const std::string& text = kOpenerText[opener];
                if (enabled_[opener] && text.compare(0, prefix.size(), prefix) == 0) {
                    return text.substr(prefix.size());
                }
            }
            break;
        }
        case Mode::End:
            break;
    }
    throw std::logic_error("no completion from this program state");
}

std::string Structure::number_completion(const State& state) const {
    const auto [low, high] = bounds(state.kind, state.field_count, state.values);
    std::optional<std::string> suffix =
        smallest_number_suffix(state.digits, state.digit_count, low, high);
    if (!suffix) throw std::logic_error("number state has no completion");
    // A span's end line equal to its start line must reach the start column; moving to the
    // next line (end column 1) can be shorter.
    if (state.kind == Kind::Span && state.field_count == 2) {
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
    return std::string(1, static_cast<char>(delimiter(state.kind, state.field_count)));
}

std::optional<State> Structure::representative(int slot) const {
    if (slot < 64) {
        const int opener = slot / 16;
        const int length = slot % 16;
        for (int enabled = 0; enabled < kOpeners; ++enabled) {
            const std::string& text = kOpenerText[enabled];
            if (!enabled_[enabled] || static_cast<size_t>(length) >= text.size()) continue;
            const State state = await_state(text.substr(0, length));
            if (state.opener == opener) return state;
        }
        return std::nullopt;
    }
    const std::array<uint64_t, 4> ones = {1, 1, 1, 1};
    if (slot < 80) {
        const Kind kind = (slot - 64) / 8 ? Kind::Span : Kind::Lines;
        const int field_count = (slot - 64) % 8 / 2;
        const bool has_digits = (slot - 64) % 2;
        if (!copies_ || (kind == Kind::Span && !subline_)) return std::nullopt;
        if (field_count > (kind == Kind::Lines ? 1 : 3)) return std::nullopt;
        return number_state(kind, field_count, ones, has_digits ? 1 : 0, has_digits ? 1 : 0);
    }
    if (slot < 88) {
        const int literal = (slot - 80) / 4;
        const int length = (slot - 80) % 4;
        if (literal == static_cast<int>(LiteralId::CopyTail)) {
            if (!copies_ || length >= 3) return std::nullopt;
            return literal_state(LiteralId::CopyTail, length, Kind::Lines, 2, ones);
        }
        if (length >= 1) return std::nullopt;
        return literal_state(LiteralId::GenNewline, 0, Kind::Lines, 0, {});
    }
    if (slot == 88) return end_state();
    return std::nullopt;
}

}  // namespace cad::program
