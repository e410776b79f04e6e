#include "program_tape.h"

#include <algorithm>
#include <stdexcept>

#include "bitmask.h"

namespace cad::drafting {

namespace {

OpView copy_view(const program::OpRecord& record) {
    OpView op;
    op.kind = record.kind == program::Kind::Lines ? OpKind::Lines : OpKind::Span;
    op.values = {static_cast<int64_t>(record.values[0]), static_cast<int64_t>(record.values[1]),
                 static_cast<int64_t>(record.values[2]), static_cast<int64_t>(record.values[3])};
    if (op.kind == OpKind::Lines) op.values[2] = op.values[3] = 0;
    return op;
}

}  // namespace

void ProgramTape::record(const int32_t* ids, size_t count, bool decided) {
    tokens_.insert(tokens_.end(), ids, ids + count);
    decided_.insert(decided_.end(), count, decided ? 1 : 0);
}

void ProgramTape::take_completed_ops(std::vector<int32_t>& out) {
    const std::vector<program::OpRecord>& ops = matcher_.ops();
    if (ops.size() > resolved_) op_start_ = static_cast<uint32_t>(matcher_.text().size());
    const size_t first = out.size();
    for (size_t i = resolved_; i < ops.size(); ++i) {
        const program::OpRecord& op = ops[i];
        if (op.is_gen) {
            const std::string_view body =
                std::string_view(matcher_.text()).substr(op.body_begin, op.body_end - op.body_begin);
            counts_.lines_generated += count_line_breaks(body);
            continue;
        }
        const Echo& echo = source_.echo(copy_view(op));
        out.insert(out.end(), echo.tokens.begin(), echo.tokens.end());
        counts_.copied += static_cast<int64_t>(echo.tokens.size());
        counts_.lines_copied += echo.line_breaks;
    }
    resolved_ = ops.size();
    counts_.ops = static_cast<int64_t>(resolved_);
    record(out.data() + first, out.size() - first, false);
}

void ProgramTape::take_forced(std::vector<int32_t>& out) {
    while (true) {
        take_completed_ops(out);
        const std::string forced = matcher_.forced_bytes();
        if (forced.empty()) return;
        const std::vector<int32_t>& ids = source_.literal(forced);
        for (int32_t token : ids) {
            if (!matcher_.accept_token(token)) {
                throw std::runtime_error("forced token " + std::to_string(token) +
                                         " rejected by the program FSM");
            }
        }
        counts_.forced += static_cast<int64_t>(ids.size());
        record(ids.data(), ids.size(), false);
        out.insert(out.end(), ids.begin(), ids.end());
    }
}

void ProgramTape::decide(int32_t token) {
    if (!matcher_.accept_token(token)) {
        throw std::runtime_error("token " + std::to_string(token) + " rejected by the program FSM");
    }
    ++counts_.generated;
    record(&token, 1, true);
}

int32_t ProgramTape::target_token(std::string_view target) {
    const size_t written = matcher_.text().size();
    const std::string_view remaining =
        written < target.size() ? target.substr(written) : std::string_view();
    prefix_tokens(trie_, remaining, prefixes_);
    for (auto it = prefixes_.rbegin(); it != prefixes_.rend(); ++it) {
        if (matcher_.accept_token(it->second)) {
            matcher_.rollback(1);
            return it->second;
        }
    }
    throw std::runtime_error("the program cannot be followed token by token");
}

void ProgramTape::finish_truncated() {
    if (!matcher_.accept_bytes(matcher_.completion_bytes())) {
        throw std::runtime_error("the program FSM rejected its own completion");
    }
    written_.clear();
    take_completed_ops(written_);
    counts_.truncated = true;
}

std::string_view ProgramTape::op_prefix() const {
    return std::string_view(matcher_.text()).substr(op_start_);
}

WalkStatus ProgramTape::next_decision(int64_t limit) {
    if (finished()) return Finished;
    if (counts_.generated >= limit) {
        finish_truncated();
        return Finished;
    }
    return NeedChoice;
}

WalkStatus ProgramTape::begin(const DraftTree& tree, int32_t known, int64_t limit) {
    if (known < 1 || known > tree.size()) throw std::invalid_argument("no known chain to walk from");
    path_.clear();
    for (int32_t node = 0; node < known; ++node) path_.push_back(node);
    pending_.clear();
    node_ = known - 1;
    return next_decision(limit);
}

WalkStatus ProgramTape::choose(const DraftTree& tree, int32_t token, int64_t limit) {
    decide(token);
    written_.assign(1, token);
    take_forced(written_);
    if (finished()) return Finished;
    for (size_t i = 0; i < written_.size(); ++i) {
        const int32_t child = tree.child(node_, written_[i]);
        if (child < 0) {
            pending_.assign(written_.begin() + static_cast<std::ptrdiff_t>(i), written_.end());
            return LeftTree;
        }
        node_ = child;
        path_.push_back(child);
    }
    return next_decision(limit);
}

WalkStatus ProgramTape::run_forced(const DraftTree& tree, int32_t known, std::string_view target,
                                   int64_t limit) {
    WalkStatus status = begin(tree, known, limit);
    while (status == NeedChoice) status = choose(tree, target_token(target), limit);
    return status;
}

ProgramTape::Mark ProgramTape::mark() const {
    return {matcher_.history_size(), tokens_.size(), resolved_, op_start_, counts_};
}

void ProgramTape::undo(const Mark& mark) {
    matcher_.rollback(matcher_.history_size() - mark.steps);
    tokens_.resize(mark.tokens);
    decided_.resize(mark.tokens);
    resolved_ = mark.resolved;
    op_start_ = mark.op_start;
    counts_ = mark.counts;
}

void ProgramTape::walk_ahead(const DraftTree& tree, int32_t node, int64_t limit, uint32_t* rows,
                             size_t words, size_t capacity, std::vector<int32_t>& nodes,
                             std::vector<int32_t>& expected) {
    nodes.clear();
    expected.clear();
    const Mark start = mark();
    std::vector<int32_t> written;
    while (counts_.generated < limit && nodes.size() < capacity) {
        uint32_t* row = rows + nodes.size() * words;
        const size_t own = bitmask_words(matcher_.vocab_size());
        matcher_.fill_bitmask(row);
        std::fill(row + own, row + words, 0u);
        nodes.push_back(node);
        expected.push_back(-1);
        const int32_t first = tree.first_child(node);
        if (first < 0) break;
        const int32_t token = tree.token(first);
        if (token < 0 || static_cast<size_t>(token) >= words * 32 || !has_token(row, token)) break;
        expected.back() = token;
        decide(token);
        written.assign(1, token);
        take_forced(written);
        if (finished()) break;
        bool inside = true;
        for (int32_t following : written) {
            const int32_t child = tree.child(node, following);
            if (child < 0) {
                inside = false;
                break;
            }
            node = child;
        }
        if (!inside) break;
    }
    undo(start);
}

}  // namespace cad::drafting
