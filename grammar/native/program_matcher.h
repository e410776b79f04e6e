// The program FSM as a matcher for one document: byte transitions from program_states.h,
// masks from the per-tokenizer ProgramIndex, a history of snapshots for rollback.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "matcher.h"
#include "program_index.h"
#include "program_states.h"

namespace cad::program {

// A completed op: a copy (kind and its 2 or 4 numbers) or a gen body (bytes of ``text``).
struct OpRecord {
    bool is_gen;
    Kind kind;
    std::array<uint64_t, 4> values;
    uint32_t body_begin;
    uint32_t body_end;
};

class ProgramMatcher final : public NativeMatcher {
  public:
    ProgramMatcher(std::shared_ptr<const ProgramIndex> index, std::vector<uint64_t> line_widths,
                   bool subline);

    int32_t vocab_size() const override { return index_->vocab_size(); }
    void fill_bitmask(uint32_t* row) override;

    bool accept_token(int32_t token);
    bool accept_bytes(const std::string& data);
    void rollback(size_t steps);
    bool is_accepting() const { return state_.mode == Mode::End; }
    size_t history_size() const { return history_.size(); }
    std::string forced_bytes() const { return structure_.forced(state_); }
    std::string completion_bytes() const { return structure_.completion(state_); }
    const std::string& text() const { return text_; }
    // The FSM state: what every continuation depends on (the drafter keys its token cache
    // by it).
    const State& state() const { return state_; }
    const std::vector<OpRecord>& ops() const { return ops_; }
    const Structure& structure() const { return structure_; }
    // Where the gen body in progress starts in ``text()`` (after ``<gen>``).
    uint32_t gen_start() const { return gen_start_; }

  private:
    struct Snapshot {
        State state;
        uint32_t text_length;
        uint32_t op_count;
        uint32_t gen_start;
    };
    bool advance(const char* data, size_t size, bool cross_ops);

    std::shared_ptr<const ProgramIndex> index_;
    Structure structure_;
    State state_;
    std::string text_;
    std::vector<OpRecord> ops_;
    uint32_t gen_start_ = 0;
    std::vector<Snapshot> history_;
};

}  // namespace cad::program
