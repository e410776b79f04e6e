"""No false acceptance, no false rejection on broken files: mutated Python agrees with the
interpreter's ``ast.parse``, mutated JSON with ``json.loads`` (and a schema's rules).

Mutations are what edits break: deleted or inserted characters (colons, brackets, quotes,
backslashes), lines indented or dedented, lines deleted or duplicated, spans cut out."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.syntax import python_parses
from cad.grammar.syntax import syntax_machine
from cad.grammar.syntax.machine import DEAD
from cad.grammar.syntax.python_syntax import python_syntax
from tests.grammar.syntax.conftest import RUNNING, small_vocabulary

_MODULES = ["textwrap.py", "colorsys.py", "json/encoder.py", "string.py", "dataclasses.py"]
_INSERTS = [
    *":()[]{},.=+-*/\\'\"#@ \t\nx1_;!<>%&|^~",
    "\n    ", "    ", "if ", "else", "lambda", "f'", "'''", "yield", "await ", "match ",
    "case ", ":=", "->", "**", "...", "not ", " in ", "pass", "\\\n", "\r", "\f", "b'",
    "f'{x}", "{", "}", "!r", "0x", "1e", "1j", "é",
]  # fmt: skip


def _source_lines() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for name in _MODULES:
        lines += (root / name).read_text(encoding="utf-8").split("\n")
    return lines


SOURCE = _source_lines()


@st.composite
def mutated_python(draw) -> str:
    start = draw(st.integers(0, len(SOURCE) - 2))
    size = draw(st.integers(2, 30))
    lines = SOURCE[start : start + size]
    indent = min((len(line) - len(line.lstrip(" ")) for line in lines if line.strip()), default=0)
    lines = [line[indent:] for line in lines]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["delete", "insert", "replace", "indent", "dedent", "drop", "copy", "cut"]
            )
        )
        row = draw(st.integers(0, len(lines) - 1))
        line = lines[row]
        column = draw(st.integers(0, len(line)))
        if kind == "delete" and line:
            lines[row] = line[: max(0, column - 1)] + line[column:]
        elif kind == "insert":
            lines[row] = line[:column] + draw(st.sampled_from(_INSERTS)) + line[column:]
        elif kind == "replace" and line:
            lines[row] = (
                line[: max(0, column - 1)] + draw(st.sampled_from(_INSERTS)) + line[column:]
            )
        elif kind == "indent":
            lines[row] = " " * draw(st.sampled_from([1, 2, 4, 8])) + line
        elif kind == "dedent":
            lines[row] = line.lstrip()
        elif kind == "drop" and len(lines) > 1:
            del lines[row]
        elif kind == "copy":
            lines.insert(row, lines[draw(st.integers(0, len(lines) - 1))])
        elif kind == "cut":
            text = "\n".join(lines)
            at = draw(st.integers(0, len(text)))
            lines = (text[:at] + text[at + draw(st.integers(1, 40)) :]).split("\n")
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_python())
def test_mutated_python_agrees_with_ast_parse(text: str) -> None:
    assert python_syntax(RUNNING).accepts(text.encode("utf-8", "surrogatepass")) == python_parses(
        text
    )


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
_JSON_INSERTS = [*list('{}[],:"\\ \n\t0123456789.eE+-'), "true", "null", "nul", "\\u12", "\x01"]
_MACHINES: dict[str, object] = {}


def _json_machine(schema=None):
    key = json.dumps(schema)
    if key not in _MACHINES:
        _MACHINES[key] = syntax_machine("json", small_vocabulary(), schema=schema)
    return _MACHINES[key]


def _mutate(draw, text: str) -> str:
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["delete", "insert", "replace"]))
        piece = draw(st.sampled_from(_JSON_INSERTS))
        if kind == "delete":
            text = text[: max(0, at - 1)] + text[at:]
        elif kind == "insert":
            text = text[:at] + piece + text[at:]
        else:
            text = text[: max(0, at - 1)] + piece + text[at:]
    return text


def _json_loads(text: str):
    def refuse(name: str):
        raise ValueError(name)

    return json.loads(text, parse_constant=refuse)


@st.composite
def mutated_json(draw) -> str:
    value = draw(_JSON_VALUES)
    indent = draw(st.sampled_from([None, 2, "\t"]))
    text = json.dumps(value, indent=indent, ensure_ascii=draw(st.booleans()))
    return _mutate(draw, text) + draw(st.sampled_from(["", "\n", " \n\n"]))


@settings(max_examples=300, deadline=None)
@given(mutated_json())
def test_mutated_json_agrees_with_json_loads(text: str) -> None:
    try:
        _json_loads(text)
        valid = True
    except ValueError:
        valid = False
    machine = _json_machine()
    state = machine.feed(machine.initial, text.encode("utf-8", "surrogatepass"))
    assert (state != DEAD and machine.is_complete(state)) == valid


SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id"],
    "additionalProperties": False,
}


def _follows_schema(value) -> bool:
    """The schema above as the front end reads it: declared keys in declared order."""
    if not isinstance(value, dict) or "id" not in value or set(value) - {"id", "tags"}:
        return False
    if list(value) != [key for key in ("id", "tags") if key in value]:
        return False
    if type(value["id"]) is not int:
        return False
    tags = value.get("tags", [])
    return isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)


def _only_characters(value) -> bool:
    """Whether every string of ``value`` is made of characters: a schema's strings are
    sequences of code points, so an escaped lone surrogate is not a string of the schema."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@st.composite
def mutated_instances(draw) -> str:
    value = {"id": draw(st.integers(-999, 999))}
    if draw(st.booleans()):
        value["tags"] = draw(st.lists(st.text(max_size=4), max_size=3))
    text = json.dumps(value, separators=(",", ":"))
    return _mutate(draw, text) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=200, deadline=None)
@given(mutated_instances())
def test_mutated_instances_agree_with_the_schema(text: str) -> None:
    try:
        value = _json_loads(text)
        valid = _follows_schema(value) and _only_characters(value)
    except ValueError:
        valid = False
    machine = _json_machine(SCHEMA)
    state = machine.feed(machine.initial, text.encode("utf-8", "surrogatepass"))
    assert (state != DEAD and machine.is_complete(state)) == valid
