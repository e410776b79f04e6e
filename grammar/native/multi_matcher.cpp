#include "multi_matcher.h"

#include <stdexcept>

namespace cad::program {

namespace {

constexpr uint32_t kGenCloseAndNewline = 7;  // "</gen>\n"
constexpr uint32_t kPathTail = 3;            // "\">\n"

std::vector<FileLines> file_lines(std::vector<std::vector<uint64_t>> widths) {
    std::vector<FileLines> files(widths.size());
    for (size_t k = 0; k < widths.size(); ++k) files[k].widths = std::move(widths[k]);
    return files;
}

std::vector<uint64_t> hashes(const std::vector<std::string>& paths) {
    std::vector<uint64_t> result;
    result.reserve(paths.size());
    for (const std::string& path : paths) result.push_back(path_hash(path));
    return result;
}

}  // namespace

MultiProgramMatcher::MultiProgramMatcher(std::shared_ptr<const ProgramIndex> index,
                                         std::vector<std::vector<uint64_t>> line_widths,
                                         std::vector<bool> editable,
                                         const std::vector<std::string>& forbidden_paths,
                                         bool subline)
    : index_(std::move(index)),
      structure_(file_lines(std::move(line_widths)), std::move(editable), hashes(forbidden_paths),
                 subline) {
    state_.own = 1;
}

void MultiProgramMatcher::fill_bitmask(uint32_t* row) { index_->fill(structure_, state_, row); }

uint32_t MultiProgramMatcher::own_file() const {
    switch (state_.scope) {
        case Scope::Top:
        case Scope::Bare:
            return 1;
        case Scope::Edit:
            return state_.own;
        default:
            return 0;
    }
}

bool MultiProgramMatcher::accept_token(int32_t token) {
    if (token < 0 || token >= vocab_size()) return false;
    if (state_.mode == MMode::End && token == index_->table().eos()) {
        history_.push_back({state_, static_cast<uint32_t>(text_.size()),
                            static_cast<uint32_t>(records_.size()), body_start_,
                            structure_.named_count()});
        return true;
    }
    const std::string_view bytes = index_->table().token(token);
    return !bytes.empty() && advance(bytes.data(), bytes.size(), false);
}

bool MultiProgramMatcher::accept_bytes(const std::string& data) {
    return !data.empty() && advance(data.data(), data.size(), true);
}

bool MultiProgramMatcher::advance(const char* data, size_t size, bool cross_ops) {
    // Stepped and recorded byte by byte (a section named early in ``data`` bounds the numbers
    // after it), then undone whole if a byte is refused.
    const Snapshot snapshot{state_, static_cast<uint32_t>(text_.size()),
                            static_cast<uint32_t>(records_.size()), body_start_,
                            structure_.named_count()};
    bool ended = false;
    for (size_t i = 0; i < size; ++i) {
        const MState before = state_;
        const std::optional<MStep> stepped = structure_.step(before, static_cast<uint8_t>(data[i]));
        if (!stepped || (ended && !cross_ops)) {
            restore(snapshot);
            return false;
        }
        state_ = stepped->state;
        text_.push_back(data[i]);
        if (before.mode == MMode::Await &&
            (state_.mode == MMode::Gen || state_.mode == MMode::Path)) {
            body_start_ = static_cast<uint32_t>(text_.size());
        }
        ended = stepped->op_ended;
        if (ended) record(before);
    }
    history_.push_back(snapshot);
    return true;
}

void MultiProgramMatcher::record(const MState& before) {
    const auto size = static_cast<uint32_t>(text_.size());
    MultiRecord entry{MultiRecord::Close, Field::Lines, 0, {}, 0, 0};
    switch (before.literal) {
        case MLiteral::CopyTail:
            entry.type = MultiRecord::Copy;
            entry.field = before.field;
            entry.file = before.file;
            entry.values = before.values;
            break;
        case MLiteral::GenNewline:
            entry.type = MultiRecord::Gen;
            entry.begin = body_start_;
            entry.end = size - kGenCloseAndNewline;
            break;
        case MLiteral::EditTail:
        case MLiteral::DeleteTail:
            entry.type = before.literal == MLiteral::EditTail ? MultiRecord::Edit : MultiRecord::Delete;
            entry.file = static_cast<uint32_t>(before.values[0]);
            structure_.name_file(before.values[0]);
            break;
        case MLiteral::CreateTail:
            entry.type = MultiRecord::Create;
            entry.begin = body_start_;
            entry.end = size - kPathTail;
            structure_.name_path(before.hash);
            break;
        default:
            break;
    }
    records_.push_back(entry);
}

void MultiProgramMatcher::restore(const Snapshot& snapshot) {
    state_ = snapshot.state;
    text_.resize(snapshot.text_length);
    records_.resize(snapshot.record_count);
    body_start_ = snapshot.body_start;
    structure_.unname_to(snapshot.named_count);
}

void MultiProgramMatcher::rollback(size_t steps) {
    if (steps > history_.size()) {
        throw std::invalid_argument("cannot roll back " + std::to_string(steps) + " of " +
                                    std::to_string(history_.size()) + " steps");
    }
    for (size_t i = 0; i < steps; ++i) {
        restore(history_.back());
        history_.pop_back();
    }
}

}  // namespace cad::program
