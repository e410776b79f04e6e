// Rewrite mode's drafter (the compiled twin of ``cad.selector.drafting.Drafter`` and of
// ``cad.selector.draft_graph``'s merging): an alignment between the output and the original
// document, the candidate continuations it suggests, and their merge into one draft tree.
//
// Every forward the decoder calls ``draft`` once: the known tokens become the tree's chain,
// the candidates (tens to hundreds of tokens each) are merged below it with their calibrated
// reach, and the tree is pruned to the budget. Work per forward is linear in the candidates'
// tokens (each a child lookup and a multiplication) plus the pruning's heap operations.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "draft_prior.h"
#include "draft_tree.h"
#include "ngram_index.h"

namespace cad::drafting {

enum SourceKind : int32_t { Aligned = 0, Ngram = 1, Output = 2, TopK = 3 };
constexpr int kSourceKinds = 4;

// One source (``kind:rank``): how long its candidates may be and its acceptance rate per
// depth bucket while copying and while editing (empty: the default rate).
struct SourceSpec {
    int32_t length = 1;
    std::vector<double> copying;
    std::vector<double> editing;
};

struct RewriteConfig {
    int32_t aligned = 0;
    int32_t ngram = 0;
    int32_t output = 0;
    int32_t top_k = 0;
    int32_t min_ngram = 1;
    int32_t max_ngram = 1;
    int32_t budget = 0;
    double min_reach = 0.0;
    double default_rate = 0.05;
    // sources[kind][rank] for every rank below that kind's count.
    std::array<std::vector<SourceSpec>, kSourceKinds> sources;

    double rate(int32_t kind, int32_t rank, int32_t depth, bool copying) const;
};

// A candidate continuation: ``lead`` (the model's token for a top-k branch, else -1) and then
// ``length`` tokens of the document (or of the output) from ``start``.
struct Candidate {
    int32_t kind;
    int32_t rank;
    int32_t lead;
    bool from_output;
    int32_t start;
    int32_t length;
};

class RewriteDrafter {
  public:
    RewriteDrafter(std::vector<int32_t> document, int32_t stop, RewriteConfig config);

    // Move the alignment past an accepted token (``origin``: its document index, -1 if it
    // was not copied from the document).
    void advance(int32_t token, int32_t origin);
    // Advance over the nodes ``path[from:]`` of ``tree`` (an accepted path).
    void advance_path(const DraftTree& tree, const int32_t* path, size_t count);

    // The candidates to follow the output; ``branch`` holds the model's top choices at the
    // last branching point.
    const std::vector<Candidate>& candidates(const int32_t* branch, size_t branch_count);
    // The tokens of a candidate and, per token, its document index (-1 for none).
    void materialize(const Candidate& candidate, std::vector<int32_t>& tokens,
                     std::vector<int32_t>& origins) const;
    // ``known`` as a chain with the candidates merged below it (each cut to ``max_depth``).
    void merge(DraftTree& tree, const int32_t* known, size_t known_count, int32_t max_depth) const;

    int32_t position() const { return position_; }
    bool copying() const { return copying_; }
    const std::vector<int32_t>& output() const { return output_; }
    const std::vector<Candidate>& last_candidates() const { return candidates_; }
    const RewriteConfig& config() const { return config_; }

  private:
    void anchors(const int32_t* tail, int32_t tail_size, int64_t total, int32_t limit,
                 std::vector<int32_t>& seen, std::vector<int32_t>& found) const;
    void repeats(int32_t limit, std::vector<int32_t>& found);
    Candidate copy_of(int32_t kind, int32_t rank, int32_t start, int32_t length) const;
    int32_t token_at(const Candidate& candidate, int32_t index, int32_t& origin) const;

    std::vector<int32_t> document_;
    std::vector<int32_t> source_;
    RewriteConfig config_;
    SortedNgrams starts_;
    NgramChains written_;
    int32_t indexed_ = 0;
    std::vector<int32_t> output_;
    int32_t position_ = 0;
    bool copying_ = true;
    std::vector<Candidate> candidates_;
    std::vector<int32_t> scratch_seen_;
    std::vector<int32_t> scratch_found_;
};

}  // namespace cad::drafting
