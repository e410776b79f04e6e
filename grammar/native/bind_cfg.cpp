// Bindings of the context-free engines: compile a lowered grammar, match over it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bind_rows.h"
#include "cfg_matcher.h"
#include "lr1.h"

namespace py = pybind11;

namespace cad {

using cfg::CfgMatcher;
using cfg::CompiledCfg;

namespace {

// Throws std::invalid_argument unless every symbol of ``grammar`` names a rule or terminal.
void check_grammar(const cfg::Grammar& grammar) {
    const int32_t nonterminals = static_cast<int32_t>(grammar.names.size());
    if (grammar.lhs.size() + 1 != grammar.rhs_begin.size() || grammar.start < 0 || grammar.start >= nonterminals) {
        throw std::invalid_argument("malformed grammar");
    }
    const int32_t terminal_count = static_cast<int32_t>(grammar.terminals.size());
    for (size_t p = 0; p < grammar.lhs.size(); ++p) {
        if (grammar.lhs[p] < 0 || grammar.lhs[p] >= nonterminals) throw std::invalid_argument("malformed grammar");
        for (int32_t i = 0; i < grammar.rhs_length(p); ++i) {
            const int32_t symbol = grammar.rhs(p)[i];
            if (symbol >= nonterminals || (symbol < 0 && cfg::terminal_index(symbol) >= terminal_count)) {
                throw std::invalid_argument("malformed grammar");
            }
        }
    }
}

// The engine for a checked grammar, built without the GIL: (compiled, why not LR(1), LR states).
py::tuple compile_for(const cfg::Grammar& grammar, std::shared_ptr<const TokenTrie> trie, const std::string& engine) {
    const cfg::EngineChoice choice = engine == "dpda"     ? cfg::EngineChoice::Dpda
                                     : engine == "earley" ? cfg::EngineChoice::Earley
                                                          : cfg::EngineChoice::Auto;
    cfg::CompileResult result;
    {
        py::gil_scoped_release release;
        result = cfg::compile_cfg(grammar, std::move(trie), choice);
    }
    return py::make_tuple(result.compiled, result.lr_note, result.lr_states);
}

}  // namespace

void bind_cfg(py::module_& m) {
    py::register_exception<cfg::NotLr1>(m, "NotLr1", PyExc_ValueError);

    py::class_<CompiledCfg, std::shared_ptr<CompiledCfg>>(
        m, "CompiledCfg", "A byte-level grammar bound to a vocabulary, with its engine's caches.")
        .def_property_readonly("engine", &CompiledCfg::engine)
        .def(
            "accepts",
            [](CompiledCfg& compiled, py::bytes data) {
                const std::string bytes = data;
                py::gil_scoped_release release;
                return compiled.accepts(bytes);
            },
            py::arg("data"))
        .def("initial_state", &CompiledCfg::initial_state,
             "The shared parse state before any input: states are ints, equal for equal texts "
             "and valid while the grammar lives, so a caller may store one and resume from it.")
        .def(
            "feed_state",
            [](CompiledCfg& compiled, int32_t state, const py::bytes& data) {
                char* buffer = nullptr;
                Py_ssize_t size = 0;
                PyBytes_AsStringAndSize(data.ptr(), &buffer, &size);
                const std::string_view bytes(buffer, static_cast<size_t>(size));
                py::gil_scoped_release release;
                return compiled.feed_state(state, bytes);
            },
            py::arg("state"), py::arg("data"),
            "The shared state after ``data`` from ``state``; -1 when no sentence starts that way.")
        .def(
            "state_accepting",
            [](CompiledCfg& compiled, int32_t state) {
                py::gil_scoped_release release;
                return compiled.state_accepting(state);
            },
            py::arg("state"), "Whether the text of the shared ``state`` is a sentence.")
        .def(
            "packed_state",
            [](CompiledCfg& compiled, int32_t state) {
                const int32_t vocab = compiled.trie().vocab_size();
                std::vector<uint32_t> row(bitmask_words(vocab));
                {
                    py::gil_scoped_release release;
                    compiled.fill_state(state, row.data());
                }
                const size_t size = (static_cast<size_t>(vocab) + 7) / 8;
                py::array_t<uint8_t> packed(static_cast<py::ssize_t>(size));
                std::memcpy(packed.mutable_data(), row.data(), size);
                return packed;
            },
            py::arg("state"),
            "The allowed tokens after the shared ``state`` as packed little-endian bits (uint8, "
            "one bit per token id; the end-of-sequence token once the text is a sentence).")
        .def("start_precompute", &CompiledCfg::start_precompute, py::arg("max_bytes"),
             "Build masks on a background thread (no GIL), holding at most ``max_bytes``; false "
             "when the engine has no worker or it was started before.")
        .def(
            "mask_stats",
            [](const CompiledCfg& compiled) {
                const MaskStats stats = compiled.mask_stats();
                py::dict result;
                result["worker_states"] = stats.worker_states;
                result["worker_bytes"] = stats.worker_bytes;
                result["demand_states"] = stats.demand_states;
                result["demand_bytes"] = stats.demand_bytes;
                result["worker_running"] = stats.worker_running;
                return result;
            },
            "What the mask cache holds: states and bytes built by the worker and on demand.");

    m.def(
        "compile_cfg",
        [](std::vector<std::string> names, std::vector<int32_t> lhs,
           std::vector<std::vector<int32_t>> rhs, const std::vector<py::bytes>& terminals,
           int32_t start, std::shared_ptr<const TokenTrie> trie, const std::string& engine) {
            if (lhs.size() != rhs.size()) throw std::invalid_argument("malformed grammar");
            cfg::Grammar grammar;
            grammar.names = std::move(names);
            for (size_t p = 0; p < lhs.size(); ++p) {
                grammar.add_production(lhs[p], rhs[p].data(), rhs[p].data() + rhs[p].size());
            }
            grammar.start = start;
            for (const py::bytes& terminal : terminals) {
                const std::string packed = terminal;
                if (packed.size() != sizeof(cfg::ByteClass)) {
                    throw std::invalid_argument("a terminal is a 32-byte class mask");
                }
                cfg::ByteClass bytes;
                std::memcpy(bytes.data(), packed.data(), packed.size());
                grammar.terminals.push_back(bytes);
            }
            check_grammar(grammar);
            return compile_for(grammar, std::move(trie), engine);
        },
        py::arg("names"), py::arg("lhs"), py::arg("rhs"), py::arg("terminals"), py::arg("start"),
        py::arg("trie"), py::arg("engine"),
        "Build the engine for a lowered grammar: (compiled, why not LR(1), LR states).");

    m.def(
        "compile_lowered",
        [](std::shared_ptr<const cfg::Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
           const std::string& engine) { return compile_for(*grammar, std::move(trie), engine); },
        py::arg("grammar"), py::arg("trie"), py::arg("engine"),
        "``compile_cfg`` for a grammar the native lowering made, read where it lies.");

    m.def(
        "lr1_tables",
        [](std::shared_ptr<const cfg::Grammar> grammar) {
            const cfg::LrTables tables = [&grammar] {
                py::gil_scoped_release release;
                return cfg::build_lr1(*grammar);
            }();
            py::list actions;
            py::list gotos;
            const int32_t atoms = tables.atoms.count();
            for (int32_t state = 0; state < tables.states; ++state) {
                py::dict action;
                for (int32_t atom = 0; atom < atoms; ++atom) {
                    const int32_t entry = tables.act(state, atom);
                    if (entry == cfg::kActionError) continue;
                    action[py::int_(atom)] = entry == cfg::kActionAccept ? (1 << 30) : entry;
                }
                actions.append(action);
                py::dict row;
                for (int32_t symbol = 0; symbol < tables.nonterminals; ++symbol) {
                    const int32_t target = tables.go(state, symbol);
                    if (target >= 0) row[py::int_(symbol)] = target;
                }
                gotos.append(row);
            }
            std::vector<int32_t> atom_of_byte(tables.atoms.atom_of_byte.begin(),
                                              tables.atoms.atom_of_byte.end());
            py::dict result;
            result["atom_of_byte"] = py::tuple(py::cast(atom_of_byte));
            result["end_atom"] = tables.atoms.end_atom;
            result["actions"] = py::tuple(actions);
            result["gotos"] = py::tuple(gotos);
            result["production_lhs"] = py::tuple(py::cast(tables.production_lhs));
            result["production_length"] = py::tuple(py::cast(tables.production_length));
            return result;
        },
        py::arg("grammar"),
        "The LR(1) tables ``compile_lowered`` builds for a grammar (LALR(1), else canonical), "
        "as the fields of ``cad.grammar.cfg.lr1.LrTables``, to inspect and compare them; "
        "NotLr1 on a conflict in both.");

    py::class_<CfgMatcher, NativeMatcher>(m, "CfgMatcher", "A matcher over a compiled grammar.")
        .def(py::init([](std::shared_ptr<CompiledCfg> compiled) { return compiled->matcher(); }),
             py::arg("compiled"))
        .def("accept_token", &CfgMatcher::accept_token, py::arg("token_id"))
        .def(
            "accept_bytes",
            [](CfgMatcher& matcher, py::bytes data) { return matcher.accept_bytes(std::string(data)); },
            py::arg("data"))
        .def("rollback", &CfgMatcher::rollback, py::arg("k"))
        .def("is_accepting", &CfgMatcher::is_accepting)
        .def("is_finished", &CfgMatcher::is_finished)
        .def_property_readonly("steps", &CfgMatcher::steps)
        .def("forced_bytes", [](CfgMatcher& matcher) { return py::bytes(matcher.forced_bytes()); });
}

}  // namespace cad
