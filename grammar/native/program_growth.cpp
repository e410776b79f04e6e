#include "program_growth.h"

#include <algorithm>
#include <cmath>

namespace cad::drafting {

namespace {

// A copy whose text the document's own tokens put at more than the budget and this many
// tokens is not tokenized to find out whether it fits (a text tokenized on its own differs
// from its stretch of the document's tokens only at its two ends).
constexpr int64_t kEstimateMargin = 16;

// Nodes grown below a forward's chain before pruning to the budget: twice the budget and 32.
// Proposals come likeliest first, so the budget's best nodes are nearly always among them;
// on the click commits, release diffs and HEvalFix-Py (budget 96, forced programs) the
// forwards were within 0.4 % of growing four times the budget and 64, and drafting with
// evicted caches took a fifth less time.
int32_t growth_limit(int32_t budget) { return 2 * budget + 32; }

OpView view_of(const program::OpRecord& record, const std::string& text) {
    OpView op;
    if (record.is_gen) {
        op.kind = OpKind::Gen;
        op.body = text.substr(record.body_begin, record.body_end - record.body_begin);
        return op;
    }
    op.kind = record.kind == program::Kind::Lines ? OpKind::Lines : OpKind::Span;
    for (size_t i = 0; i < 4; ++i) op.values[i] = static_cast<int64_t>(record.values[i]);
    if (op.kind == OpKind::Lines) op.values[2] = op.values[3] = 0;
    return op;
}

bool same_op(const program::OpRecord& record, const std::string& text, const OpView& op) {
    if (record.is_gen) {
        return op.kind == OpKind::Gen &&
               std::string_view(text).substr(record.body_begin, record.body_end - record.body_begin) ==
                   op.body;
    }
    return view_of(record, text) == op;
}

}  // namespace

ProgramDrafter::ProgramDrafter(ProgramProposals proposals,
                               std::shared_ptr<const program::ProgramIndex> index,
                               std::shared_ptr<const TokenTrie> trie,
                               std::vector<uint64_t> line_widths, std::vector<int32_t> document_ids,
                               std::vector<int64_t> line_tokens, std::vector<uint8_t> aligned,
                               bool subline, TokenSource& source)
    : proposals_(std::move(proposals)),
      tokenizer_(std::move(index), std::move(trie), std::move(line_widths), subline, source),
      source_(source),
      document_ids_(std::move(document_ids)),
      line_tokens_(std::move(line_tokens)),
      aligned_(std::move(aligned)),
      contexts_(1) {}

const ProgramContext& ProgramDrafter::context(const std::vector<OpView>& ops) {
    size_t same = 0;
    while (same < ops.size() && same < ops_.size() && ops[same] == ops_[same]) ++same;
    ops_.resize(same);
    contexts_.resize(same + 1);
    for (size_t i = same; i < ops.size(); ++i) {
        ops_.push_back(ops[i]);
        contexts_.push_back(proposals_.after(contexts_.back(), ops[i]));
    }
    return contexts_.back();
}

const ProgramContext& ProgramDrafter::context(const program::ProgramMatcher& matcher) {
    const std::vector<program::OpRecord>& records = matcher.ops();
    const std::string& text = matcher.text();
    size_t same = 0;
    while (same < records.size() && same < ops_.size() && same_op(records[same], text, ops_[same])) {
        ++same;
    }
    ops_.resize(same);
    contexts_.resize(same + 1);
    for (size_t i = same; i < records.size(); ++i) {
        ops_.push_back(view_of(records[i], text));
        contexts_.push_back(proposals_.after(contexts_.back(), ops_.back()));
    }
    return contexts_.back();
}

bool ProgramDrafter::far_longer(const OpView& op, int32_t budget) const {
    if (op.kind != OpKind::Lines) return false;
    const int64_t estimate = line_tokens_[static_cast<size_t>(op.values[1])] -
                             line_tokens_[static_cast<size_t>(op.values[0] - 1)];
    return estimate > static_cast<int64_t>(budget) + kEstimateMargin;
}

const int32_t* ProgramDrafter::copy_tokens(const OpView& op, size_t& count) {
    const auto first = static_cast<size_t>(op.values[0] - 1);
    const auto last = static_cast<size_t>(op.values[1]);
    if (op.kind == OpKind::Lines && aligned_[first] && aligned_[last]) {
        count = static_cast<size_t>(line_tokens_[last] - line_tokens_[first]);
        return document_ids_.data() + line_tokens_[first];
    }
    const std::vector<int32_t>& echo = source_.echo(op).tokens;
    count = echo.size();
    return echo.data();
}

int32_t ProgramDrafter::add_node(DraftTree& tree, int32_t parent, int32_t token, double mass) {
    const int32_t child = tree.add(parent, token, 0.0);
    const size_t at = static_cast<size_t>(child - base_);
    if (at >= reach_.size()) {
        reach_.resize(at + 1, 0.0);
        levels_.resize(at + 1, -1);
    }
    reach_[at] = std::min(reach_[at] + mass, reach_[static_cast<size_t>(parent - base_)]);
    return child;
}

void ProgramDrafter::set_level(const DraftTree& tree, int32_t top, int32_t leaf, int32_t deeper) {
    const int32_t level = levels_[static_cast<size_t>(top - base_)] + deeper;
    for (int32_t node = leaf; node != top; node = tree.parent(node)) {
        int32_t& known = levels_[static_cast<size_t>(node - base_)];
        known = known < 0 ? level : std::min(known, level);
    }
}

void ProgramDrafter::grow(DraftTree& tree, int32_t node, const ProgramContext& context,
                          std::string_view prefix, int32_t budget) {
    if (budget <= 0) return;
    limit_ = tree.size() + growth_limit(budget);
    base_ = node;
    reach_.assign(1, tree.reach(node));
    levels_.assign(1, 0);
    grow_level(tree, node, context, prefix, budget);
    const double discount = proposals_.prior().follow_discount;
    for (size_t i = 0; i < reach_.size(); ++i) {
        tree.set_reach(base_ + static_cast<int32_t>(i),
                       reach_[i] * std::pow(discount, static_cast<double>(levels_[i])));
    }
}

void ProgramDrafter::grow_level(DraftTree& tree, int32_t node, const ProgramContext& context,
                                std::string_view prefix, int32_t budget) {
    const ProgramPrior& prior = proposals_.prior();
    const double base = reach_[static_cast<size_t>(node - base_)];
    ProposalRuns found;
    proposals_.runs(context, prefix, found);
    std::vector<Completed> ends;
    std::string buffer;
    tokenizer_.begin(prefix);
    while (const Proposal* next = found.next()) {
        const Proposal& proposal = *next;
        if (tree.size() >= limit_) break;
        // Proposals come likeliest first: none after this one is likely enough either.
        if (base * proposal.mass < prior.min_reach) break;
        const std::string_view rest = proposal.text_in(buffer).substr(prefix.size());
        const OpTokens& drafted = tokenizer_.after(rest, budget + 1);
        if (drafted.tokens.empty()) continue;
        double mass = base * proposal.mass;
        bool seen_decided = false;
        int32_t leaf = node;
        for (size_t i = 0; i < drafted.tokens.size(); ++i) {
            const bool decided = drafted.decided[i] != 0;
            if (decided && seen_decided) mass *= proposal.rate;
            seen_decided = seen_decided || decided;
            leaf = add_node(tree, leaf, drafted.tokens[i], mass);
        }
        set_level(tree, node, leaf, 0);
        if (drafted.complete && proposal.op.kind != OpKind::End) {
            ends.push_back({mass, leaf, proposal.op});
        }
    }
    tokenizer_.end();
    std::stable_sort(ends.begin(), ends.end(),
                     [](const Completed& a, const Completed& b) { return -a.reach < -b.reach; });
    const size_t followed = std::min(ends.size(), static_cast<size_t>(std::max(prior.follow_ops, 0)));
    const std::vector<int32_t>& opener = source_.literal("<");
    for (size_t k = 0; k < followed; ++k) {
        const Completed& end = ends[k];
        if (end.reach < prior.follow_reach || tree.size() >= limit_) break;
        const bool copy = end.op.kind != OpKind::Gen;
        if (copy && far_longer(end.op, budget)) continue;
        size_t count = 0;
        const int32_t* tail = copy ? copy_tokens(end.op, count) : nullptr;
        if (static_cast<int64_t>(count) > budget) continue;
        int32_t leaf = end.leaf;
        for (size_t i = 0; i < count; ++i) leaf = add_node(tree, leaf, tail[i], end.reach);
        for (int32_t token : opener) leaf = add_node(tree, leaf, token, end.reach);
        set_level(tree, end.leaf, leaf, 1);
        grow_level(tree, leaf, proposals_.after(context, end.op), "<", budget);
    }
}

void ProgramDrafter::draft(const int32_t* known, size_t count, bool grow_drafts,
                           const ProgramContext& context, std::string_view prefix, int32_t budget,
                           DraftTree& full, DraftTree& kept, std::vector<int32_t>& sources) {
    full.assign_chain(known, count);
    if (grow_drafts) grow(full, static_cast<int32_t>(count) - 1, context, prefix, budget);
    full.prune(budget, 0.0, static_cast<int32_t>(count), kept, sources);
}

}  // namespace cad::drafting
