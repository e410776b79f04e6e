// What may come next in a program (the compiled twin of ``cad.selector.program_proposals``,
// whose docstrings describe every guess): the line the output has reached, and whole-op
// proposals with their probability under the calibrated program prior.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "draft_prior.h"
#include "program_text.h"

namespace cad::drafting {

enum class OpKind : uint8_t { Lines, Span, Gen, End };

// A completed op: a copy with its numbers, or a gen with its body as written (escaped).
struct OpView {
    OpKind kind = OpKind::End;
    std::array<int64_t, 4> values{};
    std::string body;

    bool operator==(const OpView& other) const {
        return kind == other.kind && values == other.values && body == other.body;
    }
};

// Where a program stands after its completed ops: the document line its output has reached,
// what the last op was, and the text its gens wrote (escaped, concatenated).
struct ProgramContext {
    int64_t cursor = 1;
    bool has_ops = false;
    bool last_gen = false;
    std::string generated;
};

// A guess at the op in progress: the op it completes (End for ``</program>``), its whole
// text from ``<`` (kept for gens and the end; a copy's is written when asked, most copies
// proposed are never tokenized), its probability, and the acceptance rate of each
// model-decided token after its first.
struct Proposal {
    OpView op;
    std::string text;
    double mass = 0.0;
    double rate = 1.0;

    // The proposal's text (a copy's written into ``buffer``).
    std::string_view text_in(std::string& buffer) const;
};

// The proposals for one op as runs already in probability order: the copies from each start
// line (likeliest end first), then the gens and the end, stably sorted. Merged (``next``),
// they come in the order a stable sort of all of them by probability gives, without writing
// out the hundreds of copies that drafting never reaches.
struct ProposalRuns {
    struct Copies {
        int64_t start;
        double mass;  // the op kind's and the start line's probability
        const std::vector<std::pair<int64_t, double>>* ends;
        size_t position;
    };
    std::vector<Copies> copies;
    std::vector<Proposal> others;
    size_t other = 0;
    std::string prefix;
    Proposal copy;

    // The next likeliest proposal, nullptr after the last (valid until the next call).
    const Proposal* next();
};

// The document as the drafter reads it: each line as a gen body would write it (escaped
// bytes) and as text (code points, for comparing written lines with it).
struct ProgramDocument {
    std::vector<std::string> line_bytes;
    std::vector<CodePoints> lines;
    std::string text_bytes;
    std::vector<int64_t> line_offsets;  // n + 1 offsets of the lines in text_bytes

    ProgramDocument() = default;
    ProgramDocument(std::vector<std::string> escaped, const std::vector<std::string>& plain);
    int64_t n_lines() const { return static_cast<int64_t>(line_bytes.size()); }
};

class ProgramProposals {
  public:
    ProgramProposals(ProgramDocument document, ProgramPrior prior);

    const ProgramDocument& document() const { return document_; }
    const ProgramPrior& prior() const { return prior_; }

    // The context after ``op`` from ``before``.
    ProgramContext after(const ProgramContext& before, const OpView& op) const;
    // The document line a gen of ``text`` written at ``line`` hands over to.
    int64_t line_after_gen(int64_t line, const CodePoints& text) const;
    // Proposals for the op whose text so far is ``prefix`` (from its ``<``), in the
    // reference's order (copies by start line and likelihood of the end, gens, the end).
    void proposals(const ProgramContext& context, std::string_view prefix,
                   std::vector<Proposal>& out) const;
    // The same proposals as runs to merge by probability.
    void runs(const ProgramContext& context, std::string_view prefix, ProposalRuns& out) const;

  private:
    struct Rest {
        std::string text;
        int64_t following;
        double share;
    };
    // What the next op follows: the start, a copy, a gen, or the document's end.
    int32_t previous_of(const ProgramContext& context) const;
    // The copies by start line, and the other proposals (gens, the end) as listed.
    void collect(const ProgramContext& context, std::string_view prefix,
                 std::vector<ProposalRuns::Copies>& copies, std::vector<Proposal>& others) const;
    void copy_runs(const ProgramContext& context, std::string_view prefix, double mass,
                   std::vector<ProposalRuns::Copies>& out) const;
    void start_lines(int64_t cursor, int32_t previous, std::string_view digits, bool complete,
                     std::vector<std::pair<int64_t, double>>& out) const;
    // The likeliest end lines of a copy from ``start`` whose number begins with ``digits``
    // (remembered: they depend on nothing else).
    const std::vector<std::pair<int64_t, double>>& end_lines(int64_t start,
                                                             std::string_view digits) const;
    void numbers_with_prefix(std::string_view digits, int64_t low, int64_t high,
                             std::vector<int64_t>& out) const;
    void body_proposals(const ProgramContext& context, std::string_view body, double mass,
                        std::vector<Proposal>& out) const;
    void line_rests(const ProgramContext& context, std::string_view body,
                    std::string_view partial, int64_t line, std::vector<Rest>& out) const;
    void document_anchors(std::string_view partial, int64_t line, std::vector<int64_t>& out) const;
    Proposal gen_proposal(std::string text, double mass) const;

    ProgramDocument document_;
    ProgramPrior prior_;
    mutable std::unordered_map<std::string, std::vector<std::pair<int64_t, double>>> ends_;
    // Every document position after a byte pair, grouped by that pair: the candidates where a
    // written tail may recur.
    std::vector<uint32_t> pair_begin_;
    std::vector<uint32_t> pair_ends_;
};

}  // namespace cad::drafting
