// Bindings of the drafting core: the draft tree, rewrite mode's and program mode's drafters,
// the program tape with its acceptance walk, and the prompt-lookup proposer. Every call is
// one forward's worth of work; arrays cross as numpy buffers.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "draft_tree.h"
#include "program_growth.h"
#include "program_index.h"
#include "program_matcher.h"
#include "program_tape.h"
#include "prompt_lookup.h"
#include "rewrite_drafter.h"

namespace py = pybind11;

namespace cad {

using drafting::DraftTree;
using drafting::OpKind;
using drafting::OpView;

namespace {

using IntArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using LongArray = py::array_t<int64_t, py::array::c_style>;

template <class T>
py::array_t<T> to_array(const std::vector<T>& values) {
    py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
    std::copy(values.begin(), values.end(), out.mutable_data());
    return out;
}

// A Python callable as a syntax oracle: ``step(state, token) -> state`` (-1 refused).
class PyOracle final : public drafting::StateOracle {
  public:
    explicit PyOracle(py::function step) : step_(std::move(step)) {}
    int64_t step(int64_t state, int32_t token) override { return step_(state, token).cast<int64_t>(); }

  private:
    py::function step_;
};

// The decoder's tokenizer: ``literal(bytes) -> list[int]`` and
// ``echo(kind, a, b, c, d) -> (list[int], line_breaks)`` for a copy op ("lines"/"span").
class PyTokenSource final : public drafting::TokenSource {
  public:
    PyTokenSource(py::function literal, py::function echo)
        : literal_(std::move(literal)), echo_(std::move(echo)) {}

  protected:
    std::vector<int32_t> encode_literal(const std::string& bytes) override {
        return literal_(py::bytes(bytes)).cast<std::vector<int32_t>>();
    }
    drafting::Echo encode_echo(const OpView& op) override {
        const char* kind = op.kind == OpKind::Lines ? "lines" : "span";
        const py::tuple answer =
            echo_(kind, op.values[0], op.values[1], op.values[2], op.values[3]).cast<py::tuple>();
        return {answer[0].cast<std::vector<int32_t>>(), answer[1].cast<int64_t>()};
    }

  private:
    py::function literal_;
    py::function echo_;
};

OpView op_from_python(const py::tuple& item) {
    OpView op;
    const std::string kind = item[0].cast<std::string>();
    if (kind == "gen") {
        op.kind = OpKind::Gen;
        op.body = item[1].cast<std::string>();
        return op;
    }
    op.kind = kind == "lines" ? OpKind::Lines : OpKind::Span;
    for (size_t i = 1; i < item.size() && i <= 4; ++i) op.values[i - 1] = item[i].cast<int64_t>();
    return op;
}

py::tuple op_to_python(const OpView& op) {
    switch (op.kind) {
        case OpKind::Gen:
            return py::make_tuple("gen", py::bytes(op.body));
        case OpKind::Lines:
            return py::make_tuple("lines", op.values[0], op.values[1]);
        case OpKind::Span:
            return py::make_tuple("span", op.values[0], op.values[1], op.values[2], op.values[3]);
        case OpKind::End:
            break;
    }
    return py::make_tuple("end");
}

drafting::ProgramPrior prior_from(const py::dict& data) {
    drafting::ProgramPrior prior;
    const char* previous[] = {"start", "copy", "gen", "past_end"};
    const char* kinds[] = {"copy", "gen", "end"};
    const py::dict next = data["next_op"].cast<py::dict>();
    for (size_t p = 0; p < 4; ++p) {
        if (!next.contains(previous[p])) continue;
        const py::dict row = next[previous[p]].cast<py::dict>();
        for (size_t k = 0; k < 3; ++k) {
            if (row.contains(kinds[k])) prior.next_op[p][k] = row[kinds[k]].cast<double>();
        }
    }
    prior.start_offsets = data["start_offsets"].cast<std::vector<double>>();
    prior.skip_lengths = data["skip_lengths"].cast<std::vector<double>>();
    prior.copy_lengths = data["copy_lengths"].cast<std::vector<double>>();
    prior.to_end = data["to_end"].cast<double>();
    prior.gen_close = data["gen_close"].cast<double>();
    prior.body_rate = data["body_rate"].cast<double>();
    prior.min_reach = data["min_reach"].cast<double>();
    prior.follow_reach = data["follow_reach"].cast<double>();
    const auto pair = [&data](const char* key) {
        const std::vector<double> values = data[key].cast<std::vector<double>>();
        if (values.size() != 2) throw std::invalid_argument(std::string(key) + " needs 2 values");
        return std::array<double, 2>{values[0], values[1]};
    };
    prior.line_shares = pair("line_shares");
    prior.resume_shares = pair("resume_shares");
    const std::vector<double> skips = data["skip_shares"].cast<std::vector<double>>();
    if (skips.size() != prior.skip_shares.size()) {
        throw std::invalid_argument("skip_shares needs 7 values");
    }
    std::copy(skips.begin(), skips.end(), prior.skip_shares.begin());
    prior.anchor_share = data["anchor_share"].cast<double>();
    prior.repeat_share = data["repeat_share"].cast<double>();
    prior.follow_discount = data["follow_discount"].cast<double>();
    prior.follow_ops = data["follow_ops"].cast<int32_t>();
    if (prior.start_offsets.size() != 2 * drafting::kStartReach + 1) {
        throw std::invalid_argument("start_offsets needs 7 values");
    }
    return prior;
}

drafting::RewriteConfig rewrite_config_from(const py::dict& data) {
    drafting::RewriteConfig config;
    config.aligned = data["aligned"].cast<int32_t>();
    config.ngram = data["ngram"].cast<int32_t>();
    config.output = data["output"].cast<int32_t>();
    config.top_k = data["top_k"].cast<int32_t>();
    config.min_ngram = data["min_ngram"].cast<int32_t>();
    config.max_ngram = data["max_ngram"].cast<int32_t>();
    config.budget = data["budget"].cast<int32_t>();
    config.min_reach = data["min_reach"].cast<double>();
    config.default_rate = data["default_rate"].cast<double>();
    if (config.min_ngram < 1 || config.max_ngram > drafting::kMaxNgram ||
        config.min_ngram > config.max_ngram) {
        throw std::invalid_argument("the native drafter takes n-grams of 1 to 4 tokens");
    }
    const py::list sources = data["sources"].cast<py::list>();
    const int32_t counts[] = {config.aligned, config.ngram, config.output, config.top_k};
    for (size_t kind = 0; kind < drafting::kSourceKinds; ++kind) {
        for (const py::handle item : sources[kind].cast<py::list>()) {
            const py::tuple spec = item.cast<py::tuple>();
            config.sources[kind].push_back({spec[0].cast<int32_t>(),
                                            spec[1].cast<std::vector<double>>(),
                                            spec[2].cast<std::vector<double>>()});
        }
        if (static_cast<int32_t>(config.sources[kind].size()) < counts[kind]) {
            throw std::invalid_argument("every source rank needs its length and rates");
        }
    }
    return config;
}

// A program matcher as the native tape sees it, kept alive with its Python object.
struct BoundTape {
    py::object matcher;
    std::shared_ptr<PyTokenSource> source;
    std::shared_ptr<const TokenTrie> trie;
    std::unique_ptr<drafting::ProgramTape> tape;
};

struct BoundDrafter {
    std::shared_ptr<PyTokenSource> source;
    std::unique_ptr<drafting::ProgramDrafter> drafter;
    DraftTree full;
    std::vector<int32_t> sources;
};

struct BoundRewrite {
    std::unique_ptr<drafting::RewriteDrafter> drafter;
    DraftTree full;
    std::vector<int32_t> sources;
    std::vector<int64_t> states;
};

const drafting::ProgramContext& context_from(BoundDrafter& self, const py::handle& ops) {
    if (py::isinstance<program::ProgramMatcher>(ops)) {
        return self.drafter->context(ops.cast<const program::ProgramMatcher&>());
    }
    std::vector<OpView> views;
    for (const py::handle item : ops) views.push_back(op_from_python(item.cast<py::tuple>()));
    return self.drafter->context(views);
}

}  // namespace

void bind_drafting(py::module_& m) {
    py::class_<DraftTree, std::shared_ptr<DraftTree>>(
        m, "DraftTree", "A token prefix tree in topological order, verified in one forward.")
        .def(py::init<>())
        .def("__len__", &DraftTree::size)
        .def("clear", &DraftTree::clear)
        .def("add", &DraftTree::add, py::arg("parent"), py::arg("token"), py::arg("reach"))
        .def("set_origin", &DraftTree::set_origin_if_unset, py::arg("node"), py::arg("origin"))
        .def(
            "assign_chain",
            [](DraftTree& tree, IntArray tokens) {
                tree.assign_chain(tokens.data(), static_cast<size_t>(tokens.size()));
            },
            py::arg("tokens"))
        .def("child", &DraftTree::child, py::arg("node"), py::arg("token"))
        .def("first_child", &DraftTree::first_child, py::arg("node"))
        .def("token", &DraftTree::token, py::arg("node"))
        .def("parent", &DraftTree::parent, py::arg("node"))
        .def("origin", &DraftTree::origin, py::arg("node"))
        .def(
            "children",
            [](const DraftTree& tree, int32_t node) {
                std::vector<int32_t> out;
                for (int32_t c = tree.first_child(node); c >= 0; c = tree.next_sibling(c)) out.push_back(c);
                return out;
            },
            py::arg("node"))
        .def(
            "child_tokens",
            [](const DraftTree& tree, int32_t node) {
                std::vector<int32_t> out;
                for (int32_t c = tree.first_child(node); c >= 0; c = tree.next_sibling(c)) {
                    out.push_back(tree.token(c));
                }
                return out;
            },
            py::arg("node"))
        .def(
            "first_children",
            [](const DraftTree& tree, int32_t node, int32_t limit) {
                std::vector<int32_t> out{node};
                while (static_cast<int32_t>(out.size()) < limit && tree.first_child(out.back()) >= 0) {
                    out.push_back(tree.first_child(out.back()));
                }
                return out;
            },
            py::arg("node"), py::arg("limit"))
        .def(
            "path",
            [](const DraftTree& tree, int32_t node) {
                std::vector<int32_t> out;
                for (; node >= 0; node = tree.parent(node)) out.push_back(node);
                std::reverse(out.begin(), out.end());
                return out;
            },
            py::arg("node"))
        .def_property_readonly("tokens", [](const DraftTree& t) { return to_array(t.tokens()); })
        .def_property_readonly("parents", [](const DraftTree& t) { return to_array(t.parents()); })
        .def_property_readonly("depths", [](const DraftTree& t) { return to_array(t.depths()); })
        .def_property_readonly("reach", [](const DraftTree& t) { return to_array(t.reaches()); })
        .def_property_readonly("origins", [](const DraftTree& t) { return to_array(t.origins()); })
        .def(
            "tokens_of",
            [](const DraftTree& tree, IntArray nodes) {
                std::vector<int32_t> out;
                out.reserve(static_cast<size_t>(nodes.size()));
                for (py::ssize_t i = 0; i < nodes.size(); ++i) out.push_back(tree.token(nodes.data()[i]));
                return out;
            },
            py::arg("nodes"))
        .def(
            "layout",
            [](const DraftTree& tree, int64_t past, LongArray tokens, LongArray parents,
               LongArray positions, int32_t first) {
                if (first < 0 || first >= tree.size()) {
                    throw std::invalid_argument("the subtree to lay out starts outside the tree");
                }
                const py::ssize_t n = tree.size() - first;
                if (tokens.size() < n || parents.size() < n || positions.size() < n) {
                    throw std::invalid_argument("the layout buffers are smaller than the tree");
                }
                int64_t* t = tokens.mutable_data();
                int64_t* p = parents.mutable_data();
                int64_t* d = positions.mutable_data();
                const int32_t top = tree.depth(first);
                for (py::ssize_t i = 0; i < n; ++i) {
                    const auto node = static_cast<int32_t>(first + i);
                    t[i] = tree.token(node);
                    p[i] = tree.parent(node) >= first ? tree.parent(node) - first : -1;
                    d[i] = past + tree.depth(node) - top;
                }
            },
            py::arg("past"), py::arg("tokens"), py::arg("parents"), py::arg("positions"),
            py::arg("first") = 0,
            "Write the tokens, parents (numbered from ``first``) and positions (``past`` + "
            "depth below ``first``) of the nodes from ``first`` on into the first entries of "
            "three int64 buffers.")
        .def(
            "fill_mask",
            [](const DraftTree& tree, py::array_t<float, py::array::c_style> out, int64_t past,
               float blocked, int32_t first) {
                if (first < 0 || first >= tree.size()) {
                    throw std::invalid_argument("the subtree to lay out starts outside the tree");
                }
                const int64_t n = tree.size() - first;
                if (out.size() < n * (past + n)) {
                    throw std::invalid_argument("the mask buffer is smaller than the tree's mask");
                }
                tree.fill_mask(out.mutable_data(), past, blocked, first);
            },
            py::arg("out"), py::arg("past"), py::arg("blocked"), py::arg("first") = 0,
            "Write the additive attention mask of the nodes from ``first`` on (rows of "
            "``past + len - first`` floats) into ``out``.")
        .def(
            "prune",
            [](const DraftTree& tree, int32_t budget, double min_reach, int32_t required,
               DraftTree& kept, std::optional<py::function> step, int64_t chain_state) {
                std::vector<int32_t> sources;
                std::vector<int64_t> states;
                if (step) {
                    PyOracle oracle(*step);
                    tree.prune(budget, min_reach, required, kept, sources, &oracle, chain_state,
                               &states);
                } else {
                    tree.prune(budget, min_reach, required, kept, sources);
                }
                return py::make_tuple(to_array(sources), to_array(states));
            },
            py::arg("budget"), py::arg("min_reach"), py::arg("required"), py::arg("kept"),
            py::arg("step") = py::none(), py::arg("chain_state") = 0);

    py::class_<PyTokenSource, std::shared_ptr<PyTokenSource>>(
        m, "TokenSource", "The decoder's tokenizer for forced literals and copied text, cached.")
        .def(py::init<py::function, py::function>(), py::arg("literal"), py::arg("echo"));

    py::class_<BoundRewrite>(m, "RewriteDrafter", "Rewrite mode's drafter (one call per forward).")
        .def(py::init([](IntArray document, int32_t stop, const py::dict& config) {
                 auto bound = std::make_unique<BoundRewrite>();
                 bound->drafter = std::make_unique<drafting::RewriteDrafter>(
                     std::vector<int32_t>(document.data(), document.data() + document.size()), stop,
                     rewrite_config_from(config));
                 return bound;
             }),
             py::arg("document"), py::arg("stop"), py::arg("config"))
        .def(
            "draft",
            [](BoundRewrite& self, IntArray known, IntArray branch, bool with_drafts,
               int32_t max_depth, DraftTree& kept, std::optional<py::function> step,
               int64_t chain_state) {
                drafting::RewriteDrafter& drafter = *self.drafter;
                const size_t count = static_cast<size_t>(known.size());
                drafter.candidates(branch.data(), static_cast<size_t>(branch.size()));
                if (with_drafts) {
                    drafter.merge(self.full, known.data(), count, max_depth);
                } else {
                    self.full.assign_chain(known.data(), count);
                }
                const drafting::RewriteConfig& config = drafter.config();
                if (step) {
                    PyOracle oracle(*step);
                    self.full.prune(config.budget, config.min_reach, static_cast<int32_t>(count), kept,
                                    self.sources, &oracle, chain_state, &self.states);
                    return py::object(to_array(self.states));
                }
                self.full.prune(config.budget, config.min_reach, static_cast<int32_t>(count), kept,
                                self.sources);
                return py::object(py::none());
            },
            py::arg("known"), py::arg("branch"), py::arg("with_drafts"), py::arg("max_depth"),
            py::arg("kept"), py::arg("step") = py::none(), py::arg("chain_state") = 0,
            "The candidates for the output so far merged below ``known`` and pruned into "
            "``kept``; with a syntax ``step`` the kept nodes' states come back.")
        .def(
            "candidates",
            [](const BoundRewrite& self) {
                static const char* names[] = {"aligned", "ngram", "output", "topk"};
                py::list out;
                std::vector<int32_t> tokens;
                std::vector<int32_t> origins;
                for (const drafting::Candidate& c : self.drafter->last_candidates()) {
                    self.drafter->materialize(c, tokens, origins);
                    py::list positions;
                    for (int32_t origin : origins) {
                        positions.append(origin < 0 ? py::object(py::none()) : py::object(py::int_(origin)));
                    }
                    out.append(py::make_tuple(std::string(names[c.kind]) + ":" + std::to_string(c.rank),
                                              py::tuple(py::cast(tokens)), py::tuple(positions)));
                }
                return out;
            },
            "The candidates of the last draft as (source key, tokens, document indices).")
        .def(
            "advance",
            [](BoundRewrite& self, int32_t token, int32_t origin) { self.drafter->advance(token, origin); },
            py::arg("token"), py::arg("origin"))
        .def(
            "advance_path",
            [](BoundRewrite& self, const DraftTree& tree, IntArray nodes) {
                self.drafter->advance_path(tree, nodes.data(), static_cast<size_t>(nodes.size()));
            },
            py::arg("tree"), py::arg("nodes"))
        .def_property_readonly("position", [](const BoundRewrite& s) { return s.drafter->position(); })
        .def_property_readonly("copying", [](const BoundRewrite& s) { return s.drafter->copying(); })
        .def_property_readonly("output", [](const BoundRewrite& s) { return s.drafter->output(); });

    m.def(
        "accept_forced_rewrite",
        [](const DraftTree& tree, int32_t known, IntArray target, int64_t written, int64_t budget,
           const std::vector<int32_t>& stops) {
            std::vector<int32_t> path;
            for (int32_t node = 0; node < known; ++node) path.push_back(node);
            const int32_t* gold = target.data();
            const int64_t size = target.size();
            while (true) {
                const int32_t node = path.back();
                const int64_t position = written + static_cast<int64_t>(path.size()) - known;
                if (position >= size) return py::tuple(py::make_tuple(to_array(path), py::none()));
                const int32_t choice = gold[position];
                const int32_t child = tree.child(node, choice);
                const bool stop = std::find(stops.begin(), stops.end(), choice) != stops.end();
                if (child < 0 || stop || position >= budget) {
                    return py::tuple(py::make_tuple(to_array(path), py::int_(choice)));
                }
                path.push_back(child);
            }
        },
        py::arg("tree"), py::arg("known"), py::arg("target"), py::arg("written"), py::arg("budget"),
        py::arg("stops"),
        "Accept down ``tree`` from its known chain while the forced target's next token is "
        "drafted: the path (chain included) and the target's token after it (None past its end).");

    py::class_<BoundDrafter>(m, "ProgramDrafter", "Program mode's drafter (one call per forward).")
        .def(py::init([](std::shared_ptr<const program::ProgramIndex> index,
                         std::shared_ptr<const TokenTrie> trie, std::shared_ptr<PyTokenSource> source,
                         std::vector<std::string> escaped_lines, std::vector<std::string> plain_lines,
                         std::vector<uint64_t> line_widths, std::vector<int32_t> document_ids,
                         std::vector<int64_t> line_tokens, std::vector<uint8_t> aligned,
                         bool subline, const py::dict& prior) {
                 if (line_tokens.size() != escaped_lines.size() + 1 ||
                     aligned.size() != line_tokens.size() ||
                     (!line_tokens.empty() &&
                      line_tokens.back() != static_cast<int64_t>(document_ids.size())) ||
                     plain_lines.size() != escaped_lines.size() ||
                     line_widths.size() != escaped_lines.size()) {
                     throw std::invalid_argument("every line needs its text, width and tokens");
                 }
                 auto bound = std::make_unique<BoundDrafter>();
                 bound->source = std::move(source);
                 drafting::ProgramProposals proposals(
                     drafting::ProgramDocument(std::move(escaped_lines), plain_lines), prior_from(prior));
                 bound->drafter = std::make_unique<drafting::ProgramDrafter>(
                     std::move(proposals), std::move(index), std::move(trie), std::move(line_widths),
                     std::move(document_ids), std::move(line_tokens), std::move(aligned), subline,
                     *bound->source);
                 return bound;
             }),
             py::arg("index"), py::arg("trie"), py::arg("source"), py::arg("escaped_lines"),
             py::arg("plain_lines"), py::arg("line_widths"), py::arg("document_ids"),
             py::arg("line_tokens"), py::arg("aligned"),
             py::arg("subline"), py::arg("prior"))
        .def(
            "draft",
            [](BoundDrafter& self, IntArray known, bool grow, const py::handle& ops,
               py::bytes prefix, int32_t budget, DraftTree& kept) {
                const drafting::ProgramContext& context = context_from(self, ops);
                const std::string text = prefix;
                self.drafter->draft(known.data(), static_cast<size_t>(known.size()), grow, context,
                                    text, budget, self.full, kept, self.sources);
            },
            py::arg("known"), py::arg("grow"), py::arg("ops"), py::arg("prefix"), py::arg("budget"),
            py::arg("kept"),
            "``known`` as a chain, the drafts of the op in progress (``prefix``) after ``ops`` (a "
            "native program matcher, or op tuples) grown below it when ``grow``, pruned into "
            "``kept``.")
        .def(
            "grow",
            [](BoundDrafter& self, DraftTree& tree, int32_t node, const py::handle& ops,
               py::bytes prefix, int32_t budget) {
                const drafting::ProgramContext context = context_from(self, ops);
                self.drafter->grow(tree, node, context, std::string(prefix), budget);
            },
            py::arg("tree"), py::arg("node"), py::arg("ops"), py::arg("prefix"), py::arg("budget"))
        .def(
            "proposals",
            [](BoundDrafter& self, const py::handle& ops, py::bytes prefix) {
                const drafting::ProgramContext context = context_from(self, ops);
                std::vector<drafting::Proposal> found;
                self.drafter->proposals().proposals(context, std::string(prefix), found);
                py::list out;
                std::string buffer;
                for (const drafting::Proposal& p : found) {
                    const std::string_view text = p.text_in(buffer);
                    out.append(py::make_tuple(py::bytes(text.data(), text.size()), op_to_python(p.op),
                                              p.mass, p.rate));
                }
                return out;
            },
            py::arg("ops"), py::arg("prefix"),
            "The proposals as (text, op tuple, probability, rate).")
        .def(
            "op_tokens",
            [](BoundDrafter& self, py::bytes prefix, py::bytes text, int32_t limit) {
                const drafting::OpTokens& found =
                    self.drafter->tokenizer().op_tokens(std::string(prefix), std::string(text), limit);
                std::vector<bool> decided(found.decided.begin(), found.decided.end());
                return py::make_tuple(found.tokens, decided, found.complete);
            },
            py::arg("prefix"), py::arg("text"), py::arg("limit"))
        .def(
            "cursor",
            [](BoundDrafter& self, const py::handle& ops) { return context_from(self, ops).cursor; },
            py::arg("ops"));

    py::class_<BoundTape>(m, "ProgramTape", "The program tape and its acceptance walk.")
        .def(py::init([](py::object matcher, std::shared_ptr<PyTokenSource> source,
                         std::shared_ptr<const TokenTrie> trie) {
                 auto bound = std::make_unique<BoundTape>();
                 bound->matcher = matcher;
                 bound->source = std::move(source);
                 bound->trie = std::move(trie);
                 bound->tape = std::make_unique<drafting::ProgramTape>(
                     matcher.cast<program::ProgramMatcher&>(), *bound->source, *bound->trie);
                 return bound;
             }),
             py::arg("matcher"), py::arg("source"), py::arg("trie"))
        .def("take_forced",
             [](BoundTape& self) {
                 std::vector<int32_t> out;
                 self.tape->take_forced(out);
                 return out;
             })
        .def("decide", [](BoundTape& self, int32_t token) { self.tape->decide(token); }, py::arg("token"))
        .def(
            "target_token",
            [](BoundTape& self, py::bytes target) {
                return self.tape->target_token(std::string(target));
            },
            py::arg("target"))
        .def("finish_truncated", [](BoundTape& self) { self.tape->finish_truncated(); })
        .def_property_readonly("finished", [](const BoundTape& self) { return self.tape->finished(); })
        .def("op_prefix", [](const BoundTape& self) { return py::bytes(std::string(self.tape->op_prefix())); })
        .def(
            "begin",
            [](BoundTape& self, const DraftTree& tree, int32_t known, int64_t limit) {
                return static_cast<int32_t>(self.tape->begin(tree, known, limit));
            },
            py::arg("tree"), py::arg("known"), py::arg("limit"))
        .def(
            "choose",
            [](BoundTape& self, const DraftTree& tree, int32_t token, int64_t limit) {
                return static_cast<int32_t>(self.tape->choose(tree, token, limit));
            },
            py::arg("tree"), py::arg("token"), py::arg("limit"))
        .def(
            "run_forced",
            [](BoundTape& self, const DraftTree& tree, int32_t known, py::bytes target, int64_t limit) {
                return static_cast<int32_t>(self.tape->run_forced(tree, known, std::string(target), limit));
            },
            py::arg("tree"), py::arg("known"), py::arg("target"), py::arg("limit"))
        .def(
            "walk_ahead",
            [](BoundTape& self, const DraftTree& tree, int32_t node, int64_t limit, uintptr_t rows,
               size_t words, size_t capacity) {
                std::vector<int32_t> nodes;
                std::vector<int32_t> expected;
                self.tape->walk_ahead(tree, node, limit, reinterpret_cast<uint32_t*>(rows), words,
                                      capacity, nodes, expected);
                return py::make_tuple(nodes, expected);
            },
            py::arg("tree"), py::arg("node"), py::arg("limit"), py::arg("rows"), py::arg("words"),
            py::arg("capacity"))
        .def_property_readonly("node", [](const BoundTape& self) { return self.tape->node(); })
        .def_property_readonly("path", [](const BoundTape& self) { return to_array(self.tape->path()); })
        .def_property_readonly("pending", [](const BoundTape& self) { return self.tape->pending(); })
        .def_property_readonly("tokens", [](const BoundTape& self) { return self.tape->tokens(); })
        .def_property_readonly("decided",
                               [](const BoundTape& self) {
                                   return std::vector<bool>(self.tape->decided().begin(),
                                                            self.tape->decided().end());
                               })
        .def_property_readonly("counts", [](const BoundTape& self) {
            const drafting::TapeCounts& c = self.tape->counts();
            return py::make_tuple(c.generated, c.forced, c.copied, c.ops, c.lines_copied,
                                  c.lines_generated, c.truncated);
        });

    py::class_<drafting::PromptLookup>(m, "PromptLookup",
                                       "Prompt-lookup drafts over a growing token sequence.")
        .def(py::init<int32_t>(), py::arg("max_ngram"))
        .def(
            "extend",
            [](drafting::PromptLookup& lookup, IntArray tokens) {
                lookup.extend(tokens.data(), static_cast<size_t>(tokens.size()));
            },
            py::arg("tokens"))
        .def(
            "draft",
            [](const drafting::PromptLookup& lookup, int32_t count) {
                std::vector<int32_t> out;
                lookup.draft(count, out);
                return out;
            },
            py::arg("count"))
        .def("__len__", &drafting::PromptLookup::size);
}

}  // namespace cad
