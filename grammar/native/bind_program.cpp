// Bindings of the program FSM: its per-tokenizer index and the matcher.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bind_rows.h"
#include "program_index.h"
#include "program_matcher.h"

namespace py = pybind11;

namespace cad {

// The drafters, the draft tree and the tape that run on the program FSM (bind_drafting.cpp).
void bind_drafting(py::module_& m);

using program::Kind;
using program::OpRecord;
using program::ProgramIndex;
using program::ProgramMatcher;

void bind_program(py::module_& m) {
    py::class_<ProgramIndex, std::shared_ptr<ProgramIndex>>(
        m, "ProgramIndex", "The program FSM's per-tokenizer masks and digit-token tables.")
        .def_static(
            "build",
            [](const TokenTrie& trie) {
                py::gil_scoped_release release;
                return std::make_shared<ProgramIndex>(trie);
            },
            py::arg("trie"))
        .def_static(
            "load",
            [](std::shared_ptr<const TokenTable> table, py::bytes blob) {
                const std::string data = blob;
                py::gil_scoped_release release;
                return std::make_shared<ProgramIndex>(std::move(table), data);
            },
            py::arg("table"), py::arg("blob"))
        .def("serialize", [](const ProgramIndex& index) { return py::bytes(index.serialize()); })
        .def_property_readonly("vocab_size", &ProgramIndex::vocab_size);

    py::class_<ProgramMatcher, NativeMatcher>(m, "ProgramMatcher",
                                              "The program FSM for one document.")
        .def(py::init<std::shared_ptr<const ProgramIndex>, std::vector<uint64_t>, bool>(),
             py::arg("index"), py::arg("line_widths"), py::arg("subline"))
        .def("accept_token", &ProgramMatcher::accept_token, py::arg("token_id"))
        .def(
            "accept_bytes",
            [](ProgramMatcher& matcher, py::bytes data) {
                return matcher.accept_bytes(std::string(data));
            },
            py::arg("data"))
        .def("rollback", &ProgramMatcher::rollback, py::arg("k"))
        .def("is_accepting", &ProgramMatcher::is_accepting)
        .def_property_readonly("history_size", &ProgramMatcher::history_size)
        .def("forced_bytes",
             [](const ProgramMatcher& matcher) { return py::bytes(matcher.forced_bytes()); })
        .def("completion_bytes",
             [](const ProgramMatcher& matcher) { return py::bytes(matcher.completion_bytes()); })
        .def_property_readonly("text",
                               [](const ProgramMatcher& matcher) { return py::bytes(matcher.text()); })
        .def_property_readonly("op_count",
                               [](const ProgramMatcher& matcher) { return matcher.ops().size(); })
        .def(
            "op_record",
            [](const ProgramMatcher& matcher, size_t index) -> py::tuple {
                const OpRecord& op = matcher.ops().at(index);
                if (op.is_gen) {
                    return py::make_tuple(
                        "gen", py::bytes(matcher.text().substr(op.body_begin,
                                                               op.body_end - op.body_begin)));
                }
                if (op.kind == Kind::Lines) {
                    return py::make_tuple("lines", op.values[0], op.values[1]);
                }
                return py::make_tuple("span", op.values[0], op.values[1], op.values[2],
                                      op.values[3]);
            },
            py::arg("index"));
    bind_drafting(m);
}

}  // namespace cad
