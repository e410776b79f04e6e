// The multi-file tables of the ProgramIndex: for every multi_slot, the tokens allowed whatever
// the files (a row) and the few whose fate depends on them (walked per state): tokens read in
// an opener (which openers a scope enables), in a number, in a copy's attribute (spans) or
// at a path's closing quote (the paths a program may not create).
#include <functional>
#include <stdexcept>

#include "program_index.h"
#include "trie_walk.h"

namespace cad::program {

namespace {

class MultiWalker {
  public:
    struct Entry {
        MState state;
        bool touched;   // a byte of the path depends on more than the shape slot
        bool op_ended;  // the path ends a line: no longer token may go on
    };
    template <class OnAccept>
    MultiWalker(const MultiStructure& structure, OnAccept on_accept)
        : structure_(structure), on_accept_(std::move(on_accept)) {}

    int32_t start(const MState& state) {
        entries_.clear();
        entries_.push_back({state, false, false});
        return 0;
    }
    int32_t step(int32_t config, uint8_t byte) {
        const Entry parent = entries_[config];
        const std::optional<MStep> stepped = structure_.step(parent.state, byte);
        if (!stepped) return kDead;
        entries_.push_back({stepped->state,
                            parent.touched || MultiStructure::context_dependent(parent.state, byte),
                            stepped->op_ended});
        return static_cast<int32_t>(entries_.size() - 1);
    }
    bool descend(int32_t config) const { return !entries_[config].op_ended; }
    void accept(uint32_t node, int32_t config) { on_accept_(node, entries_[config]); }
    void dependent(uint32_t, int32_t) {}
    size_t mark() const { return entries_.size(); }
    void release(size_t mark) { entries_.resize(mark); }

  private:
    const MultiStructure& structure_;
    std::function<void(uint32_t, const Entry&)> on_accept_;
    std::vector<Entry> entries_;
};

}  // namespace

void ProgramIndex::build_multi(const TokenTrie& trie, const std::vector<bool>& digit_token) {
    const MultiStructure shape = MultiStructure::shape();
    WalkScratch frames;
    for (int slot = 0; slot < kMultiSlots; ++slot) {
        const std::optional<MState> start = shape.representative(slot);
        if (!start) continue;
        ShapeEntry& entry = multi_[slot];
        entry.present = true;
        entry.fixed = TokenSet(vocab_size());
        if (start->mode == MMode::End) {
            if (table_->eos() >= 0) entry.fixed.add(table_->eos());
            continue;
        }
        const bool skip_digits = start->mode == MMode::Number;
        MultiWalker walker(shape, [&](uint32_t node, const MultiWalker::Entry& reached) {
            for (const int32_t* id = trie.tokens_begin(node); id != trie.tokens_end(node); ++id) {
                if (skip_digits && digit_token[*id]) continue;
                if (reached.touched) {
                    entry.dynamic.push_back(*id);
                } else {
                    entry.fixed.add(*id);
                }
            }
        });
        walk_subtree(trie, 0, walker.start(*start), walker, frames);
    }
}

void ProgramIndex::fill(const MultiStructure& structure, const MState& state,
                        uint32_t* row) const {
    if (state.mode == MMode::Gen) {
        gen_[state.pending ? 5 + state.pending : state.matched].write(row);
        return;
    }
    if (state.mode == MMode::Path &&
        state.chars + static_cast<uint64_t>(table_->longest_token()) >= kMaxPathChars) {
        fill_walking_all(structure, state, row);
        return;
    }
    const ShapeEntry& entry = multi_[multi_slot(state)];
    if (!entry.present) throw std::logic_error("program state outside the index");
    entry.fixed.write(row);
    if (state.mode == MMode::Number) {
        if (state.field == Field::Lines || state.field == Field::Span) {
            const auto [low, high] = structure.line_bounds(state);
            add_digit_tokens(row, state.digit_count, state.digits, low, high);
        } else {
            for (const auto& [low, high] : structure.file_runs(state)) {
                add_digit_tokens(row, state.digit_count, state.digits, low, high);
            }
        }
    }
    for (int32_t id : entry.dynamic) {
        const std::string_view bytes = table_->token(id);
        if (structure.walk(state, bytes.data(), bytes.size(), false)) set_token(row, id);
    }
}

void ProgramIndex::fill_walking_all(const MultiStructure& structure, const MState& state,
                                    uint32_t* row) const {
    const size_t words = bitmask_words(vocab_size());
    for (size_t word = 0; word < words; ++word) row[word] = 0;
    for (int32_t id = 0; id < vocab_size(); ++id) {
        const std::string_view bytes = table_->token(id);
        if (!bytes.empty() && structure.walk(state, bytes.data(), bytes.size(), false)) {
            set_token(row, id);
        }
    }
}

}  // namespace cad::program
