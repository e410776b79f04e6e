// Binding of the native front end: the lowering reads a ``RuleSet`` of
// ``cad.grammar.cfg.syntax_tree`` expressions once (each distinct object once) and returns the
// lowered, simplified grammar; the partition refinement minimises the translation's automata.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <structmember.h>

#include <climits>
#include <memory>
#include <cstring>
#include <string>
#include <vector>

#include "cfg_lowering.h"
#include "dfa_partition.h"

namespace py = pybind11;

namespace cad {

namespace {

using cfg::ExprKind;
using cfg::ExprNode;
using cfg::RuleExprs;

PyObject* interned(const char* name) { return PyUnicode_InternFromString(name); }

// The attribute names read, interned once for the life of the process.
struct Names {
    PyObject* text = interned("text");
    PyObject* ranges = interned("ranges");
    PyObject* negated = interned("negated");
    PyObject* name = interned("name");
    PyObject* parts = interned("parts");
    PyObject* options = interned("options");
    PyObject* body = interned("body");
    PyObject* low = interned("low");
    PyObject* high = interned("high");
};

const Names& names() {
    static const Names value;
    return value;
}

// A field of an expression class: read straight from its slot when the class keeps it in
// one (the member descriptor's definition), by attribute lookup otherwise.
struct Field {
    PyObject* name;
    PyMemberDef* member;
};

Field field_of(PyObject* type, PyObject* name) {
    const py::object descriptor = py::reinterpret_steal<py::object>(PyObject_GetAttr(type, name));
    if (!descriptor) throw py::error_already_set();
    if (Py_TYPE(descriptor.ptr()) != &PyMemberDescr_Type) return {name, nullptr};
    // The descriptor lives in the class's dictionary, as long as the class.
    return {name, reinterpret_cast<PyMemberDescrObject*>(descriptor.ptr())->d_member};
}

py::object attribute(PyObject* object, const Field& field) {
    PyObject* value = field.member != nullptr
                          ? PyMember_GetOne(reinterpret_cast<const char*>(object), field.member)
                          : PyObject_GetAttr(object, field.name);
    if (value == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(value);
}

// A repetition count: None is unbounded (-1); a count past int64 is kept as the largest
// int64, which any budget refuses just as it would the count itself.
int64_t count(PyObject* value, bool none_allowed) {
    if (none_allowed && value == Py_None) return -1;
    int overflow = 0;
    const long long result = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (result == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (overflow < 0 || (overflow == 0 && result < 0)) {
        throw py::value_error("a repetition count must not be negative");
    }
    return overflow > 0 ? INT64_MAX : static_cast<int64_t>(result);
}

int32_t code_point(PyObject* value) {
    const long long result = PyLong_AsLongLong(value);
    if (result == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (result < 0 || result > 0x10FFFF) throw py::value_error("a code point must lie in 0..0x10FFFF");
    return static_cast<int32_t>(result);
}

// A tuple's items are read in place; any other sequence is copied into a tuple first.
py::tuple tuple_of(const py::object& items) {
    if (PyTuple_Check(items.ptr())) return py::reinterpret_borrow<py::tuple>(items);
    PyObject* copy = PySequence_Tuple(items.ptr());
    if (copy == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::tuple>(copy);
}

// The UTF-8 text of a str (UnicodeEncodeError for lone surrogates, as ``str.encode``).
std::string text_of(PyObject* value) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(value, &size);
    if (data == nullptr) throw py::error_already_set();
    return std::string(data, static_cast<size_t>(size));
}

class ExprReader {
   public:
    explicit ExprReader(RuleExprs& out) : out_(out) {
        out_.nodes.reserve(512);
        out_.children.reserve(1024);
        const py::module_ tree = py::module_::import("cad.grammar.cfg.syntax_tree");
        literal_ = tree.attr("Literal").ptr();
        char_class_ = tree.attr("CharClass").ptr();
        rule_ref_ = tree.attr("RuleRef").ptr();
        sequence_ = tree.attr("Sequence").ptr();
        choice_ = tree.attr("Choice").ptr();
        repeat_ = tree.attr("Repeat").ptr();
        const Names& name = names();
        text_ = field_of(literal_, name.text);
        ranges_ = field_of(char_class_, name.ranges);
        negated_ = field_of(char_class_, name.negated);
        rule_name_ = field_of(rule_ref_, name.name);
        parts_ = field_of(sequence_, name.parts);
        options_ = field_of(choice_, name.options);
        body_ = field_of(repeat_, name.body);
        low_ = field_of(repeat_, name.low);
        high_ = field_of(repeat_, name.high);
    }

    void read_rules(const py::dict& rules, const std::string& start) {
        std::vector<PyObject*> exprs{nullptr};
        out_.names.push_back(start);
        PyObject* key = nullptr;
        PyObject* value = nullptr;
        Py_ssize_t position = 0;
        while (PyDict_Next(rules.ptr(), &position, &key, &value)) {
            std::string name = text_of(key);
            if (name == start) {
                exprs[0] = value;
                rule_ids_[key] = py::int_(0);
            } else {
                rule_ids_[key] = py::int_(exprs.size());
                out_.names.push_back(std::move(name));
                exprs.push_back(value);
            }
        }
        if (exprs[0] == nullptr) throw py::key_error(start);
        for (PyObject* expr : exprs) out_.roots.push_back(read(expr));
    }

   private:
    // The node of ``object``, read once however many parents share it.
    int32_t read(PyObject* object) {
        size_t at = slot_of(object);
        if (seen_[at].first == object) return seen_[at].second;
        const int32_t node = read_new(object);
        at = slot_of(object);  // the table may have grown while the children were read
        seen_[at] = {object, node};
        if (2 * out_.nodes.size() > seen_.size()) grow_seen();
        return node;
    }

    // The slot of ``object`` in the open-addressing table of objects read: its own, or the
    // empty one where it would go.
    size_t slot_of(PyObject* object) const {
        const size_t mask = seen_.size() - 1;
        size_t at = (reinterpret_cast<uintptr_t>(object) >> 4) * 0x9E3779B97F4A7C15ULL >> 20 & mask;
        while (seen_[at].first != nullptr && seen_[at].first != object) at = (at + 1) & mask;
        return at;
    }

    void grow_seen() {
        std::vector<std::pair<PyObject*, int32_t>> old(2 * seen_.size(), {nullptr, 0});
        old.swap(seen_);
        for (const auto& entry : old) {
            if (entry.first != nullptr) seen_[slot_of(entry.first)] = entry;
        }
    }

    int32_t add(const ExprNode& node) {
        out_.nodes.push_back(node);
        return static_cast<int32_t>(out_.nodes.size()) - 1;
    }

    int32_t read_new(PyObject* object) {
        PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(object));
        ExprNode node;
        if (type == literal_) {
            const py::object text = attribute(object, text_);
            Py_ssize_t size = 0;
            const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
            if (data == nullptr) throw py::error_already_set();
            node.kind = ExprKind::Literal;
            node.begin = static_cast<int32_t>(out_.text.size());
            out_.text.append(data, static_cast<size_t>(size));
            node.end = static_cast<int32_t>(out_.text.size());
        } else if (type == char_class_) {
            node.kind = ExprKind::CharClass;
            node.negated = PyObject_IsTrue(attribute(object, negated_).ptr()) == 1;
            node.begin = static_cast<int32_t>(out_.ranges.size());
            const py::tuple ranges = tuple_of(attribute(object, ranges_));
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ranges.ptr()); ++i) {
                const py::tuple bounds = tuple_of(py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(ranges.ptr(), i)));
                if (PyTuple_GET_SIZE(bounds.ptr()) != 2) throw py::value_error("a character class range is a pair");
                const int32_t low = code_point(PyTuple_GET_ITEM(bounds.ptr(), 0));
                const int32_t high = code_point(PyTuple_GET_ITEM(bounds.ptr(), 1));
                if (low > high) throw py::value_error("a character class range must start at its low end");
                out_.ranges.emplace_back(low, high);
            }
            node.end = static_cast<int32_t>(out_.ranges.size());
        } else if (type == rule_ref_) {
            const py::object rule = attribute(object, rule_name_);
            PyObject* found = PyDict_GetItemWithError(rule_ids_.ptr(), rule.ptr());
            if (found == nullptr) {
                if (PyErr_Occurred()) throw py::error_already_set();
                throw py::key_error(text_of(rule.ptr()));
            }
            node.kind = ExprKind::RuleRef;
            node.target = static_cast<int32_t>(PyLong_AsLong(found));
        } else if (type == sequence_ || type == choice_) {
            node.kind = type == sequence_ ? ExprKind::Sequence : ExprKind::Choice;
            const py::tuple items = tuple_of(attribute(object, type == sequence_ ? parts_ : options_));
            // The children's nodes gather on a stack shared by every level (a child's own
            // children are taken off it before it returns), then move to the node's range.
            const size_t first = pending_.size();
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items.ptr()); ++i) {
                const int32_t child = read(PyTuple_GET_ITEM(items.ptr(), i));
                pending_.push_back(child);
            }
            node.begin = static_cast<int32_t>(out_.children.size());
            out_.children.insert(out_.children.end(), pending_.begin() + static_cast<std::ptrdiff_t>(first), pending_.end());
            node.end = static_cast<int32_t>(out_.children.size());
            pending_.resize(first);
        } else if (type == repeat_) {
            node.kind = ExprKind::Repeat;
            node.target = read(attribute(object, body_).ptr());
            node.low = count(attribute(object, low_).ptr(), false);
            node.high = count(attribute(object, high_).ptr(), true);
        } else {
            throw py::type_error(std::string("not a grammar expression: ") + Py_TYPE(object)->tp_name);
        }
        return add(node);
    }

    RuleExprs& out_;
    PyObject* literal_;
    PyObject* char_class_;
    PyObject* rule_ref_;
    PyObject* sequence_;
    PyObject* choice_;
    PyObject* repeat_;
    Field text_, ranges_, negated_, rule_name_, parts_, options_, body_, low_, high_;
    std::vector<std::pair<PyObject*, int32_t>> seen_ =
        std::vector<std::pair<PyObject*, int32_t>>(1024, {nullptr, 0});  // object -> node
    std::vector<int32_t> pending_;  // children read, not yet moved to their parent's range
    py::dict rule_ids_;  // rule name (str) -> id: RuleRef names are looked up by their hash
};

}  // namespace

void bind_lowering(py::module_& m) {
    py::register_exception<cfg::LoweringError>(m, "LoweringError", PyExc_ValueError);

    py::class_<cfg::Grammar, std::shared_ptr<cfg::Grammar>>(
        m, "LoweredGrammar", "A byte-level grammar the native lowering made, kept in native form.")
        .def_property_readonly("names", [](const cfg::Grammar& grammar) { return grammar.names; })
        .def_property_readonly("start", [](const cfg::Grammar& grammar) { return grammar.start; })
        .def_property_readonly("nonterminal_count",
                               [](const cfg::Grammar& grammar) { return grammar.names.size(); })
        .def(
            "productions",
            [](const cfg::Grammar& grammar) {
                py::list productions(grammar.lhs.size());
                for (size_t p = 0; p < grammar.lhs.size(); ++p) {
                    py::tuple rhs(grammar.rhs_length(p));
                    for (int32_t i = 0; i < grammar.rhs_length(p); ++i) rhs[i] = py::int_(grammar.rhs(p)[i]);
                    productions[p] = py::make_tuple(grammar.lhs[p], std::move(rhs));
                }
                return productions;
            },
            "The productions as (lhs, rhs tuple) pairs.")
        .def(
            "terminals",
            [](const cfg::Grammar& grammar) {
                std::string packed(grammar.terminals.size() * sizeof(cfg::ByteClass), '\0');
                for (size_t t = 0; t < grammar.terminals.size(); ++t) {
                    std::memcpy(packed.data() + t * sizeof(cfg::ByteClass), grammar.terminals[t].data(),
                                sizeof(cfg::ByteClass));
                }
                return py::bytes(packed);
            },
            "The terminals' byte classes, 32 bytes each (a little-endian 256-bit mask).");

    m.def(
        "lower_rules",
        [](const py::dict& rules, const std::string& start, int64_t max_symbols) {
            RuleExprs exprs;
            ExprReader(exprs).read_rules(rules, start);
            py::gil_scoped_release release;
            return std::make_shared<cfg::Grammar>(cfg::lower_and_simplify(std::move(exprs), max_symbols));
        },
        py::arg("rules"), py::arg("start"), py::arg("max_symbols"),
        "Lower named syntax-tree expressions (``start`` first) into a byte-level grammar with "
        "at most ``max_symbols`` symbols and clean it up. LoweringError past the budget or when "
        "the start derives nothing.");

    m.def("coarsest_partition", &cfg::coarsest_partition, py::arg("table"), py::arg("symbols"),
          py::arg("initial"),
          "The block of every state in the coarsest partition of a DFA's states that keeps the "
          "``initial`` classes apart: ``table`` is the states' targets, ``symbols`` per state, "
          "row by row (a missing move goes to a dead state among them). Hopcroft's refinement.");
}

}  // namespace cad
