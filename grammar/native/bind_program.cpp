// Bindings of the program FSM: its per-tokenizer index and the matcher.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bind_rows.h"
#include "multi_matcher.h"
#include "program_index.h"
#include "program_matcher.h"

namespace py = pybind11;

namespace cad {

// The drafters, the draft tree and the tape that run on the program FSM (bind_drafting.cpp).
void bind_drafting(py::module_& m);

using program::Field;
using program::Kind;
using program::MultiProgramMatcher;
using program::MultiRecord;
using program::OpRecord;
using program::ProgramIndex;
using program::ProgramMatcher;

namespace {

py::tuple copy_tuple(const MultiRecord& record) {
    const char* kind = record.field == Field::Lines ? "lines" : "span";
    if (record.field == Field::Lines) {
        return py::make_tuple("copy", record.file, kind,
                              py::make_tuple(record.values[0], record.values[1]));
    }
    const py::tuple numbers =
        py::make_tuple(record.values[0], record.values[1], record.values[2], record.values[3]);
    return py::make_tuple("copy", record.file, kind, numbers);
}

void bind_multi_program(py::module_& m) {
    py::class_<MultiProgramMatcher, NativeMatcher>(m, "MultiProgramMatcher",
                                                   "The program FSM for a set of files.")
        .def(py::init([](std::shared_ptr<const ProgramIndex> index,
                         std::vector<std::vector<uint64_t>> line_widths, std::vector<bool> editable,
                         const std::vector<py::bytes>& forbidden_paths, bool subline) {
                 std::vector<std::string> paths(forbidden_paths.begin(), forbidden_paths.end());
                 return std::make_unique<MultiProgramMatcher>(
                     std::move(index), std::move(line_widths), std::move(editable), paths, subline);
             }),
             py::arg("index"), py::arg("line_widths"), py::arg("editable"),
             py::arg("forbidden_paths"), py::arg("subline"))
        .def("accept_token", &MultiProgramMatcher::accept_token, py::arg("token_id"))
        .def(
            "accept_bytes",
            [](MultiProgramMatcher& matcher, py::bytes data) {
                return matcher.accept_bytes(std::string(data));
            },
            py::arg("data"))
        .def("rollback", &MultiProgramMatcher::rollback, py::arg("k"))
        .def("is_accepting", &MultiProgramMatcher::is_accepting)
        .def_property_readonly("history_size", &MultiProgramMatcher::history_size)
        .def("forced_bytes",
             [](const MultiProgramMatcher& matcher) { return py::bytes(matcher.forced_bytes()); })
        .def("completion_bytes",
             [](const MultiProgramMatcher& matcher) {
                 return py::bytes(matcher.completion_bytes());
             })
        .def_property_readonly(
            "text", [](const MultiProgramMatcher& matcher) { return py::bytes(matcher.text()); })
        .def_property_readonly("own_file", &MultiProgramMatcher::own_file)
        .def_property_readonly(
            "record_count", [](const MultiProgramMatcher& matcher) { return matcher.records().size(); })
        .def(
            "record",
            [](const MultiProgramMatcher& matcher, size_t index) -> py::tuple {
                const MultiRecord& record = matcher.records().at(index);
                const auto bytes = [&matcher, &record] {
                    return py::bytes(matcher.text().substr(record.begin, record.end - record.begin));
                };
                switch (record.type) {
                    case MultiRecord::Copy:
                        return copy_tuple(record);
                    case MultiRecord::Gen:
                        return py::make_tuple("gen", bytes());
                    case MultiRecord::Edit:
                        return py::make_tuple("edit", record.file);
                    case MultiRecord::Create:
                        return py::make_tuple("create", bytes());
                    case MultiRecord::Delete:
                        return py::make_tuple("delete", record.file);
                    default:
                        return py::make_tuple("close");
                }
            },
            py::arg("index"));
}

}  // namespace

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
    bind_multi_program(m);
    bind_drafting(m);
}

}  // namespace cad
