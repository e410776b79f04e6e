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
#include "program_probe.h"

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
using program::State;

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

const char* mode_name(program::Mode mode) {
    switch (mode) {
        case program::Mode::Await: return "await";
        case program::Mode::Number: return "num";
        case program::Mode::Literal: return "lit";
        case program::Mode::Gen: return "gen";
        case program::Mode::End: return "end";
    }
    return "end";
}

py::tuple numbers_tuple(const State& state, int count) {
    py::tuple numbers(count);
    for (int i = 0; i < count; ++i) numbers[i] = state.values[i];
    return numbers;
}

py::object resolved_piece(const program::ResolvedPiece& piece) {
    if (!piece.is_copy) return py::bytes(piece.text);
    if (piece.kind == Kind::Lines) return py::make_tuple("lines", piece.values[0], piece.values[1]);
    return py::make_tuple("span", piece.values[0], piece.values[1], piece.values[2],
                          piece.values[3]);
}

void bind_program_state(py::module_& m) {
    py::class_<State>(m, "ProgramState",
                      "A state of the program FSM as the syntax layer reads it (immutable).")
        .def_property_readonly("mode", [](const State& state) { return mode_name(state.mode); })
        .def_property_readonly(
            "prefix",
            [](const State& state) {
                if (state.mode != program::Mode::Await) return py::bytes();
                return py::bytes(program::kOpenerText[state.opener].substr(0, state.length));
            },
            "Between ops: the part of an opener read so far.")
        .def_property_readonly(
            "kind",
            [](const State& state) { return state.kind == Kind::Lines ? "lines" : "span"; },
            "Reading a number: the kind of copy.")
        .def_property_readonly(
            "values",
            [](const State& state) { return numbers_tuple(state, state.field_count); },
            "Reading a number: the numbers of the copy already finished.")
        .def_property_readonly(
            "digits",
            [](const State& state) {
                if (!state.digit_count) return py::bytes();
                return py::bytes(std::to_string(state.digits));
            },
            "Reading a number: its digits so far.");
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

    bind_program_state(m);
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
        .def_property_readonly("state", &ProgramMatcher::state, "The FSM state (a copy).")
        .def_property_readonly(
            "gen_body",
            [](const ProgramMatcher& matcher) {
                if (matcher.state().mode != program::Mode::Gen) return py::bytes();
                return py::bytes(matcher.text().substr(matcher.gen_start()));
            },
            "The bytes of the gen body in progress, as written (empty outside one).")
        .def(
            "probe",
            [](const ProgramMatcher& matcher, py::bytes data, bool cross_ops,
               uint32_t definite) -> py::object {
                const std::string bytes(data);
                const auto found = program::probe(matcher, bytes, cross_ops, definite);
                if (!found) return py::none();
                py::list pieces;
                for (const auto& piece : found->pieces) pieces.append(resolved_piece(piece));
                return py::make_tuple(found->state, pieces, found->definite,
                                      py::bytes(found->held));
            },
            py::arg("data"), py::arg("cross_ops"), py::arg("definite"),
            "What ``data`` would add from the current state, without taking it: None if the "
            "program structure forbids it, else (state after, resolved pieces in order: the "
            "decided bytes of gen bodies and the copies that end as (kind, *numbers), how much "
            "of the gen body in progress is decided, its undecided rest). ``definite``: how "
            "much of the gen body in progress was decided before.")
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
