// The draft tree both decoders verify in one forward: a token prefix tree in topological
// order (a parent before its children), its pruning to a budget and its attention layout.
//
// Node 0 is the root; a chain of known tokens (what the forward must feed anyway) comes
// first and the drafts hang below its last node. Children keep their insertion order (the
// first child is the likeliest continuation the drafter proposed) and are found by token
// through an open-addressing index, so adding or finding a child is a probe or two and a
// tree reused from forward to forward allocates nothing once it has grown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cad::drafting {

// (parent, token) -> child, cleared in O(1) by a generation stamp.
class ChildIndex {
  public:
    ChildIndex() : slots_(1024) {}
    void clear();
    int32_t find(int32_t parent, int32_t token) const;
    void insert(int32_t parent, int32_t token, int32_t child);

  private:
    struct Slot {
        uint64_t key = 0;
        int32_t value = 0;
        uint32_t generation = 0;
    };
    static uint64_t key_of(int32_t parent, int32_t token) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) |
               static_cast<uint32_t>(token);
    }
    size_t slot_of(uint64_t key) const {
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 29) & (slots_.size() - 1);
    }
    void grow();

    std::vector<Slot> slots_;
    size_t size_ = 0;
    uint32_t generation_ = 1;
};

// Decides whether a drafted token may follow a node (a syntax constraint): the state after
// ``token`` from ``state``, or -1 where the text cannot go on with it.
class StateOracle {
  public:
    virtual ~StateOracle() = default;
    virtual int64_t step(int64_t state, int32_t token) = 0;
};

class DraftTree {
  public:
    void clear();
    int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

    // The child of ``parent`` for ``token`` (its reach raised to ``reach`` if higher), or a
    // new one; ``parent`` -1 makes a root.
    int32_t add(int32_t parent, int32_t token, double reach);
    // A new child that is known not to exist yet (pruning copies a tree).
    int32_t append(int32_t parent, int32_t token, double reach);
    // The known tokens as a chain from the root, reach 1.
    void assign_chain(const int32_t* tokens, size_t count);

    int32_t child(int32_t node, int32_t token) const { return index_.find(node, token); }
    int32_t first_child(int32_t node) const { return first_child_[node]; }
    int32_t next_sibling(int32_t node) const { return next_sibling_[node]; }
    int32_t child_count(int32_t node) const { return child_count_[node]; }

    int32_t token(int32_t node) const { return tokens_[node]; }
    int32_t parent(int32_t node) const { return parents_[node]; }
    int32_t depth(int32_t node) const { return depths_[node]; }
    double reach(int32_t node) const { return reach_[node]; }
    void set_reach(int32_t node, double value) { reach_[node] = value; }
    // The document index the node's token was copied from (rewrite drafts), -1 for none.
    int32_t origin(int32_t node) const { return origins_[node]; }
    void set_origin_if_unset(int32_t node, int32_t origin) {
        if (origins_[node] < 0) origins_[node] = origin;
    }

    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::vector<int32_t>& parents() const { return parents_; }
    const std::vector<int32_t>& depths() const { return depths_; }
    const std::vector<double>& reaches() const { return reach_; }
    const std::vector<int32_t>& origins() const { return origins_; }

    // Keep the first ``required`` nodes (a chain from the root) and at most ``budget`` drafted
    // nodes below them in ``kept``, best score first among nodes whose parent is kept, leaving
    // out nodes less likely than ``min_reach``; a node's score is the geometric mean of its
    // reach and the geometric mean of its children's (Spiffy). ``sources[k]`` is the node of
    // this tree that kept node ``k`` copies. With an ``oracle`` a drafted node is kept only
    // where it allows the token from its parent's state (``states`` holds the kept nodes'
    // states, the chain's all ``chain_state``), and scores count only allowed children.
    void prune(int32_t budget, double min_reach, int32_t required, DraftTree& kept,
               std::vector<int32_t>& sources, StateOracle* oracle = nullptr,
               int64_t chain_state = 0, std::vector<int64_t>* states = nullptr) const;

    // The additive attention mask of the nodes from ``first`` on (their subtree: the nodes
    // before it are a chain already in the cache) fed after ``past`` cached tokens: row ``i``
    // of ``out`` (``(size() - first) * (past + size() - first)`` floats) is 0 over the cache,
    // the node's ancestors from ``first`` and itself, and ``blocked`` elsewhere.
    void fill_mask(float* out, int64_t past, float blocked, int32_t first = 0) const;

  private:
    double score(int32_t node, const std::vector<int64_t>* child_states) const;

    std::vector<int32_t> tokens_;
    std::vector<int32_t> parents_;
    std::vector<int32_t> depths_;
    std::vector<double> reach_;
    std::vector<int32_t> origins_;
    std::vector<int32_t> first_child_;
    std::vector<int32_t> last_child_;
    std::vector<int32_t> next_sibling_;
    std::vector<int32_t> child_count_;
    ChildIndex index_;
};

// Geometric mean of positive numbers, 0 if any is not positive (as the Python reference
// computes it: the logarithms summed in order, then one exponential).
double geometric_mean(const double* values, size_t count);

}  // namespace cad::drafting
