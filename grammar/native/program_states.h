// States and byte transitions of the canonical program language (the compiled twin of
// ``cad.grammar.program_states``; that module's docstring describes the language).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cad::program {

constexpr uint64_t kUnbounded = 1000000000000000000ULL;  // 10**18: numbers of the shape

enum class Mode : uint8_t { Await, Number, Literal, Gen, End };
enum class Kind : uint8_t { Lines, Span };
enum class LiteralId : uint8_t { CopyTail, GenNewline };

// The op openers, in a fixed order; a structure enables a subset of them.
enum Opener : uint8_t { CopyLines = 0, CopySpan = 1, GenOpen = 2, ProgramEnd = 3 };
constexpr int kOpeners = 4;
extern const std::array<std::string, kOpeners> kOpenerText;

struct State {
    Mode mode = Mode::Await;
    // Await: the prefix read so far is kOpenerText[opener] cut to ``length`` bytes, ``opener``
    // being the first opener (in the fixed order) with that prefix.
    // Literal: which literal and how much of it is read.
    uint8_t opener = 0;
    uint8_t length = 0;
    LiteralId literal = LiteralId::CopyTail;
    // Gen: UTF-8 validator state and how much of ``</gen>`` the body ends with.
    uint8_t pending = 0;
    uint8_t matched = 0;
    // Number (and Literal after a copy: the finished op).
    Kind kind = Kind::Lines;
    uint8_t field_count = 0;
    uint8_t digit_count = 0;
    uint64_t digits = 0;
    std::array<uint64_t, 4> values{};

    bool operator==(const State& other) const;
};

struct Step {
    State state;
    bool op_ended;
};

// The document-independent identity of a state (numbers erased), a dense small int used to
// index the per-tokenizer mask tables. Gen states have their own tables.
constexpr int kShapeSlots = 96;
int shape_slot(const State& state);

class Structure {
  public:
    // ``widths`` empty with ``bounded`` false: the shape (unbounded numbers).
    Structure(std::vector<uint64_t> widths, bool bounded, bool subline, bool copies);

    static Structure shape(bool copies, bool subline) { return Structure({}, false, subline, copies); }

    bool copies() const { return copies_; }
    bool subline() const { return subline_; }
    int shape_key() const { return (copies_ ? 2 : 0) + (subline_ ? 1 : 0); }
    bool enabled(int opener) const { return enabled_[opener]; }

    std::optional<Step> step(const State& state, uint8_t byte) const;
    // The state after ``data`` or nothing; unless ``cross_ops``, no byte may follow the newline
    // that ends an op.
    std::optional<State> walk(State state, const char* data, size_t size, bool cross_ops) const;
    std::pair<uint64_t, uint64_t> bounds(Kind kind, int field_count,
                                         const std::array<uint64_t, 4>& values) const;
    static uint8_t delimiter(Kind kind, int field_index);
    // The shortest bytes that end the program from ``state``.
    std::string completion(State state) const;
    // The bytes every continuation must start with, up to the end of the current op.
    std::string forced(State state) const;
    // A concrete state standing for shape slot ``slot`` (numbers of 1), if the slot exists here.
    std::optional<State> representative(int slot) const;

  private:
    std::optional<Step> await_step(const State& state, uint8_t byte) const;
    std::optional<Step> number_step(const State& state, uint8_t byte) const;
    std::string completion_chunk(const State& state) const;
    std::string number_completion(const State& state) const;

    std::vector<uint64_t> widths_;
    bool bounded_;
    bool subline_;
    bool copies_;
    uint64_t lines_;
    std::array<bool, kOpeners> enabled_{};
};

std::optional<uint8_t> utf8_step(uint8_t pending, uint8_t byte);
bool number_prefix_ok(uint64_t value, int digit_count, uint64_t low, uint64_t high);
// The fewest (then smallest) digits that turn ``value`` (``count`` digits read) into a number in
// [low, high]; nothing if no number there starts with it.
std::optional<std::string> smallest_number_suffix(uint64_t value, int count, uint64_t low,
                                                  uint64_t high);
int decimal_length(uint64_t value);

// The one distinct byte of ``candidates`` that ``steps`` accepts; nothing when none or several
// do (the forced-literal search of both program FSMs).
template <class Steps>
std::optional<uint8_t> only_accepted_byte(const std::string& candidates, Steps steps) {
    std::optional<uint8_t> only;
    for (size_t i = 0; i < candidates.size(); ++i) {
        const auto byte = static_cast<uint8_t>(candidates[i]);
        if (candidates.find(static_cast<char>(byte)) != i || !steps(byte)) continue;
        if (only) return std::nullopt;
        only = byte;
    }
    return only;
}

}  // namespace cad::program
