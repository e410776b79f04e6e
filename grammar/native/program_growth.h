// Program mode's drafter (the compiled twin of ``cad.selector.program_growth``): proposals
// tokenized and grown into a draft tree below the tokens the next forward must feed, each
// node with the probability that verification reaches it; a likely op that completes is
// followed by the text the tape appends after it and by the proposals for the op after that.
// ``draft`` runs one forward's drafting in one call: the chain, the growth and the pruning.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "draft_tree.h"
#include "program_matcher.h"
#include "program_proposals.h"
#include "program_tokens.h"

namespace cad::drafting {

class ProgramDrafter {
  public:
    // ``document_ids``: the document's own tokens; ``line_tokens[k]``: how many of them start
    // before line k + 1 (n + 1 values), what a copy's token count is estimated from;
    // ``aligned[k]``: whether one starts exactly there (or the document ends there), so a
    // copy of whole lines between two such places is drafted as that stretch of tokens.
    ProgramDrafter(ProgramProposals proposals, std::shared_ptr<const program::ProgramIndex> index,
                   std::shared_ptr<const TokenTrie> trie, std::vector<uint64_t> line_widths,
                   std::vector<int32_t> document_ids, std::vector<int64_t> line_tokens,
                   std::vector<uint8_t> aligned, bool subline, TokenSource& source);

    // The context after the completed ``ops`` (remembered, so a program that only grew costs
    // the new ops alone).
    const ProgramContext& context(const std::vector<OpView>& ops);
    const ProgramContext& context(const program::ProgramMatcher& matcher);

    // Add drafts below ``node`` (where the op in progress reads ``prefix`` in ``context``).
    void grow(DraftTree& tree, int32_t node, const ProgramContext& context,
              std::string_view prefix, int32_t budget);
    // ``known`` as a chain, drafts grown below it when ``grow_drafts``, pruned into ``kept``.
    void draft(const int32_t* known, size_t count, bool grow_drafts, const ProgramContext& context,
               std::string_view prefix, int32_t budget, DraftTree& full, DraftTree& kept,
               std::vector<int32_t>& sources);

    ProgramProposals& proposals() { return proposals_; }
    ProgramTokenizer& tokenizer() { return tokenizer_; }

  private:
    struct Completed {
        double reach;
        int32_t leaf;
        OpView op;
    };
    void grow_level(DraftTree& tree, int32_t node, const ProgramContext& context,
                    std::string_view prefix, int32_t budget);
    int32_t add_node(DraftTree& tree, int32_t parent, int32_t token, double mass);
    void set_level(const DraftTree& tree, int32_t top, int32_t leaf, int32_t deeper);
    // Whether a copy's text is estimated (from the document's own tokens) to hold clearly
    // more than ``budget`` tokens: then it is not tokenized to find out whether it fits.
    bool far_longer(const OpView& op, int32_t budget) const;

    ProgramProposals proposals_;
    ProgramTokenizer tokenizer_;
    TokenSource& source_;
    // The tokens a copy's text is drafted as: its stretch of the document's tokens where
    // that stretch starts and ends on its line boundaries, else the text tokenized alone.
    const int32_t* copy_tokens(const OpView& op, size_t& count);

    std::vector<int32_t> document_ids_;
    std::vector<int64_t> line_tokens_;
    std::vector<uint8_t> aligned_;
    std::vector<OpView> ops_;
    std::vector<ProgramContext> contexts_;
    int32_t base_ = 0;
    int32_t limit_ = 0;
    std::vector<double> reach_;
    std::vector<int32_t> levels_;
};

}  // namespace cad::drafting
