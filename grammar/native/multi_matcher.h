// The multi-file program FSM as a matcher for a set of files: byte transitions from
// multi_states.h, masks from the per-tokenizer ProgramIndex, a history of snapshots for
// rollback (the sections written so far included).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "matcher.h"
#include "multi_states.h"
#include "program_index.h"

namespace cad::program {

// A completed line of a multi-file program: an op (a copy, with the file it names or 0 for
// the own file, or a gen body), a section tag, or a section's closer.
struct MultiRecord {
    enum Type : uint8_t { Copy, Gen, Edit, Create, Delete, Close };
    Type type;
    Field field;                     // Copy: Lines or Span
    uint32_t file;                   // Copy: the named file (0: own); Edit, Delete: the file
    std::array<uint64_t, 4> values;  // Copy: its numbers
    uint32_t begin;                  // Gen: the body, Create: the path, as bytes of ``text``
    uint32_t end;
};

class MultiProgramMatcher final : public NativeMatcher {
  public:
    MultiProgramMatcher(std::shared_ptr<const ProgramIndex> index,
                        std::vector<std::vector<uint64_t>> line_widths, std::vector<bool> editable,
                        const std::vector<std::string>& forbidden_paths, bool subline);

    int32_t vocab_size() const override { return index_->vocab_size(); }
    void fill_bitmask(uint32_t* row) override;

    bool accept_token(int32_t token);
    bool accept_bytes(const std::string& data);
    void rollback(size_t steps);
    bool is_accepting() const { return state_.mode == MMode::End; }
    size_t history_size() const { return history_.size(); }
    std::string forced_bytes() const { return structure_.forced(state_); }
    std::string completion_bytes() const { return structure_.completion(state_); }
    const std::string& text() const { return text_; }
    const std::vector<MultiRecord>& records() const { return records_; }
    // The file a copy without a file attribute takes from here (0: none, e.g. in a created
    // file or between sections).
    uint32_t own_file() const;

  private:
    struct Snapshot {
        MState state;
        uint32_t text_length;
        uint32_t record_count;
        uint32_t body_start;
        size_t named_count;
    };
    bool advance(const char* data, size_t size, bool cross_ops);
    void record(const MState& before);
    void restore(const Snapshot& snapshot);

    std::shared_ptr<const ProgramIndex> index_;
    MultiStructure structure_;
    MState state_;
    std::string text_;
    std::vector<MultiRecord> records_;
    uint32_t body_start_ = 0;
    std::vector<Snapshot> history_;
};

}  // namespace cad::program
