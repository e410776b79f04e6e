#include "program_matcher.h"

#include <stdexcept>

namespace cad::program {

namespace {

constexpr uint32_t kGenCloseAndNewline = 7;  // "</gen>\n"

}  // namespace

ProgramMatcher::ProgramMatcher(std::shared_ptr<const ProgramIndex> index,
                               std::vector<uint64_t> line_widths, bool subline)
    : index_(std::move(index)), structure_(std::move(line_widths), true, subline, true) {}

void ProgramMatcher::fill_bitmask(uint32_t* row) { index_->fill(structure_, state_, row); }

bool ProgramMatcher::accept_token(int32_t token) {
    if (token < 0 || token >= vocab_size()) return false;
    if (state_.mode == Mode::End && token == index_->table().eos()) {
        history_.push_back({state_, static_cast<uint32_t>(text_.size()),
                            static_cast<uint32_t>(ops_.size()), gen_start_});
        return true;
    }
    const std::string_view bytes = index_->table().token(token);
    return !bytes.empty() && advance(bytes.data(), bytes.size(), false);
}

bool ProgramMatcher::accept_bytes(const std::string& data) {
    return !data.empty() && advance(data.data(), data.size(), true);
}

bool ProgramMatcher::advance(const char* data, size_t size, bool cross_ops) {
    if (!structure_.walk(state_, data, size, cross_ops)) return false;
    history_.push_back({state_, static_cast<uint32_t>(text_.size()),
                        static_cast<uint32_t>(ops_.size()), gen_start_});
    for (size_t i = 0; i < size; ++i) {
        const State before = state_;
        const Step stepped = *structure_.step(before, static_cast<uint8_t>(data[i]));
        state_ = stepped.state;
        text_.push_back(data[i]);
        if (state_.mode == Mode::Gen && before.mode == Mode::Await) {
            gen_start_ = static_cast<uint32_t>(text_.size());
        }
        if (!stepped.op_ended) continue;
        if (before.literal == LiteralId::GenNewline) {
            ops_.push_back({true, Kind::Lines, {}, gen_start_,
                            static_cast<uint32_t>(text_.size()) - kGenCloseAndNewline});
        } else {
            ops_.push_back({false, before.kind, before.values, 0, 0});
        }
    }
    return true;
}

void ProgramMatcher::rollback(size_t steps) {
    if (steps > history_.size()) {
        throw std::invalid_argument("cannot roll back " + std::to_string(steps) + " of " +
                                std::to_string(history_.size()) + " steps");
    }
    for (size_t i = 0; i < steps; ++i) {
        const Snapshot& snapshot = history_.back();
        state_ = snapshot.state;
        text_.resize(snapshot.text_length);
        ops_.resize(snapshot.op_count);
        gen_start_ = snapshot.gen_start;
        history_.pop_back();
    }
}

}  // namespace cad::program
