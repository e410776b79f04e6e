"""Character automata: patterns against Python's ``re``, set operations against set logic,
numeric languages against decimal arithmetic, formats against the standard library."""

from __future__ import annotations

import datetime
import ipaddress
import re
import uuid
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cad.grammar import _native
from cad.grammar.cfg.char_automata import (
    Dfa,
    any_string,
    hopcroft_blocks,
    intersect,
    intersect_ranges,
    length_dfa,
    literal_dfa,
    minimize,
    normalize,
    subtract,
    subtract_ranges,
    union,
)
from cad.grammar.cfg.errors import GrammarError
from cad.grammar.cfg.regex_pattern import pattern_dfa
from cad.grammar.cfg.schema_formats import format_pattern
from cad.grammar.cfg.schema_numbers import bound_dfa, multiple_dfa, number_syntax_dfa

PATTERNS = [
    "ab",
    "^ab",
    "ab$",
    "^a(b|c)*d$",
    "^([0-1]?[0-9]|2[0-3]):[0-5][0-9]$",
    "^[a-c]{2,3}$",
    "a{2}|^c",
    "^(?:a|b)+?c?$",
    "[^ab]b",
    "^\\d+(\\.\\d{1,2})?$",
    "^\\w+@\\w+\\.c$",
    "(a|^b)c$",
    "^$",
    "a.c",
    "^[\\w-]+$",
    "^(?<n>a)b{0,}$",
    "x{,2}",
]
ALPHABET = "abcd01:.@_-x{},"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("pattern", PATTERNS)
@SETTINGS
@given(text=st.text(alphabet=ALPHABET, max_size=8))
def test_patterns_match_like_python_search(pattern: str, text: str) -> None:
    python = pattern.replace("(?<n>", "(?P<n>").replace("$", r"\Z").replace("{,", r"\{,")
    assert bool(pattern_dfa(pattern).run(text)) == bool(re.search(python, text, re.ASCII))


def test_pattern_escapes_and_classes() -> None:
    dfa = pattern_dfa("^\\u00e9\\x41\\t[\\s][^\\S\\n]\\/\\.$")
    assert dfa.run("éA\t \u3000/.")
    assert not dfa.run("éA\t \n/.")
    assert pattern_dfa("^\\u{1F600}\\ud83d\\ude00$").run("😀😀")
    assert pattern_dfa("^\\cJ$").run("\n")
    assert pattern_dfa("^a{$").run("a{") and pattern_dfa("^[\\d-z]+$").run("1-z")


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        ("(?=a)", "lookaround"),
        ("(?<!a)b", "lookaround"),
        ("(a)\\1", "backreference"),
        ("\\bword", "word boundary"),
        ("\\p{L}", "Unicode property"),
        ("(?i)a", "inline flag"),
        ("a**", "repeated quantifier"),
        ("(a", "unclosed group"),
        ("[b-a]", "reversed class range"),
    ],
)
def test_unsupported_regex_constructs_are_named(pattern: str, construct: str) -> None:
    with pytest.raises(GrammarError, match=construct):
        pattern_dfa(pattern)


@SETTINGS
@given(
    words=st.lists(st.text(alphabet="abc", max_size=4), max_size=6),
    others=st.lists(st.text(alphabet="abc", max_size=4), max_size=6),
    probe=st.text(alphabet="abc", max_size=5),
)
def test_set_operations(words: list[str], others: list[str], probe: str) -> None:
    left = literal_dfa((w, "accept") for w in words)
    right = literal_dfa((w, "accept") for w in others)
    assert bool(intersect(left, right).run(probe)) == (probe in words and probe in others)
    assert bool(subtract(left, right).run(probe)) == (probe in words and probe not in others)
    assert bool(union(left, right).run(probe)) == (probe in words or probe in others)
    assert bool(subtract(any_string(), left).run(probe)) == (probe not in words)
    assert bool(intersect(length_dfa(1, 2), left).run(probe)) == (
        probe in words and 1 <= len(probe) <= 2
    )


@st.composite
def automata(draw: st.DrawFn) -> Dfa:
    """Any DFA over a few character ranges: random targets, tags and missing edges, now and
    then a long counted chain (which signature refinement does not finish in its rounds)."""
    if draw(st.booleans()):
        chain = length_dfa(draw(st.integers(0, 3)), draw(st.integers(30, 80)))
        words = draw(st.lists(st.text("ab", max_size=6), max_size=4))
        return union(chain, literal_dfa((word, "word") for word in words))
    size = draw(st.integers(1, 12))
    ranges = [(0x61, 0x61), (0x62, 0x63), (0x100, 0x10FFFF)]
    rows = []
    for _ in range(size):
        edges = [
            (low, high, draw(st.integers(0, size - 1)))
            for low, high in ranges
            if draw(st.booleans())
        ]
        rows.append(tuple(edges))
    tags = tuple(frozenset(draw(st.sets(st.sampled_from(["x", "y"]), max_size=1))) for _ in rows)
    return Dfa(tuple(rows), tags)


@settings(max_examples=200, deadline=None)
@given(automata())
def test_native_refinement_gives_the_reference_automaton(dfa: Dfa) -> None:
    """``minimize`` refines natively; the Python refinement reaches the same blocks, so the
    automaton is the same, and minimising it again changes nothing."""
    minimal = minimize(dfa)
    assert minimize(dfa, hopcroft_blocks) == minimal
    assert minimize(minimal) == minimal


def same_partition(left: list[int], right: list[int]) -> bool:
    return all(
        (left[a] == left[b]) == (right[a] == right[b])
        for a in range(len(left))
        for b in range(len(left))
    )


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_native_partition_equals_the_reference(data: st.DataObject) -> None:
    """Random tables (every target a state, a few symbols, a few initial classes): the
    native refinement's blocks are the reference's, as a partition."""
    states = data.draw(st.integers(1, 14))
    symbols = data.draw(st.integers(1, 4))
    table = [[data.draw(st.integers(0, states - 1)) for _ in range(symbols)] for _ in range(states)]
    initial = [data.draw(st.integers(0, 2)) for _ in range(states)]
    flat = [target for row in table for target in row]
    native = _native.coarsest_partition(flat, symbols, initial)
    assert same_partition(native, hopcroft_blocks(table, initial))
    for a in range(states):  # blocks never mix the initial classes
        assert all(initial[a] == initial[b] for b in range(states) if native[a] == native[b])


def test_native_partition_refuses_a_malformed_table() -> None:
    with pytest.raises(ValueError, match="one row of every symbol"):
        _native.coarsest_partition([0, 0, 0], 2, [0, 0])
    with pytest.raises(ValueError, match="not a state"):
        _native.coarsest_partition([0, 5], 1, [0, 1])


def test_minimal_and_tagged() -> None:
    dfa = literal_dfa([("ab", "x"), ("ac", "y"), ("b", "x")])
    assert dfa.run("ab") == {"x"} and dfa.run("ac") == {"y"} and dfa.run("a") == frozenset()
    assert minimize(dfa).size == dfa.size
    assert pattern_dfa("^(a|b)*$").size == 1


DECIMALS = st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False)


def plain(value: Decimal, zeros: int) -> str:
    text = format(value, "f")
    if zeros and "." not in text:
        text += "." + "0" * zeros
    elif zeros:
        text += "0" * zeros
    return text


@SETTINGS
@given(value=DECIMALS, bound=DECIMALS, zeros=st.integers(0, 2))
def test_bounds_compare_values(value: Decimal, bound: Decimal, zeros: int) -> None:
    text = plain(value, zeros)
    syntax = number_syntax_dfa(integer=False)
    for wanted, holds in (
        ({1}, value > bound),
        ({0, 1}, value >= bound),
        ({-1}, value < bound),
        ({-1, 0}, value <= bound),
    ):
        dfa = intersect(syntax, bound_dfa(bound, frozenset(wanted)))
        assert bool(dfa.run(text)) == holds, (text, bound, wanted)


@SETTINGS
@given(value=DECIMALS, divisor=st.sampled_from(["3", "0.5", "0.01", "2.5", "7", "100", "0.25"]))
def test_multiple_of_is_exact(value: Decimal, divisor: str) -> None:
    text = plain(value, 1)
    dfa = intersect(number_syntax_dfa(integer=False), multiple_dfa(Decimal(divisor)))
    assert bool(dfa.run(text)) == (value % Decimal(divisor) == 0), text


def test_number_syntax() -> None:
    numbers = number_syntax_dfa(integer=False)
    integers = number_syntax_dfa(integer=True)
    for text in ["0", "-0", "10", "-3.25", "0.0"]:
        assert numbers.run(text)
    for text in ["01", "1.", ".5", "--1", "1e5", "+1", ""]:
        assert not numbers.run(text)
    assert integers.run("-12") and not integers.run("1.0")


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return re.fullmatch(r"\d{4}-\d\d-\d\d", text) is not None


def _is_ip(text: str, version: int) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.version == version and "%" not in text


@SETTINGS
@given(year=st.integers(1, 9999), month=st.integers(0, 13), day=st.integers(0, 32))
def test_date_format_checks_calendar(year: int, month: int, day: int) -> None:
    text = f"{year:04d}-{month:02d}-{day:02d}"
    assert bool(pattern_dfa(format_pattern("date")).run(text)) == _is_date(text)


@SETTINGS
@given(st.ip_addresses(v=6).map(str) | st.text(alphabet="0123456789abcdef:.", max_size=20))
def test_ipv6_format_matches_ipaddress(text: str) -> None:
    assert bool(pattern_dfa(format_pattern("ipv6")).run(text)) == _is_ip(text, 6)


@SETTINGS
@given(st.ip_addresses(v=4).map(str) | st.text(alphabet="0123456789.", max_size=16))
def test_ipv4_format_matches_ipaddress(text: str) -> None:
    expected = _is_ip(text, 4) and all(p == str(int(p)) for p in text.split("."))
    assert bool(pattern_dfa(format_pattern("ipv4")).run(text)) == expected


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        (
            "date-time",
            ["2024-02-29T23:59:60Z", "1999-12-31t00:00:00.5+05:30"],
            ["2024-02-29 10:00:00Z", "2024-02-29T10:00:00"],
        ),
        ("time", ["12:30:00Z", "00:00:00-01:00"], ["24:00:00Z", "12:30Z"]),
        ("duration", ["P1Y2M3DT4H5M6S", "P2W", "PT0S", "P1D"], ["P", "PT", "P1H", "P1W2D"]),
        ("email", ["a.b+c@example.com", "x@[127.0.0.1]"], ["a@", "@b.c", "a..b@c.d", "a b@c.d"]),
        ("hostname", ["example.com", "a-b.c", "x"], ["-a.com", "a..b", "a_b.com", "a" * 64]),
        (
            "uri",
            ["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:x@y.z"],
            ["example.com", "http://a b", "http://%zz"],
        ),
        ("uri-reference", ["../a/b", "#frag", "https://x.y"], ["a b"]),
        ("json-pointer", ["", "/a/b~0c/~1"], ["a", "/~2"]),
    ],
)
def test_formats(name: str, good: list[str], bad: list[str]) -> None:
    dfa = pattern_dfa(format_pattern(name))
    for text in good:
        assert dfa.run(text), text
    for text in bad:
        assert not dfa.run(text), text


@SETTINGS
@given(st.uuids().map(str) | st.text(alphabet="0123456789abcdefABCDEF-", min_size=30, max_size=38))
def test_uuid_format(text: str) -> None:
    try:
        expected = str(uuid.UUID(text)) == text.lower()
    except ValueError:
        expected = False
    assert bool(pattern_dfa(format_pattern("uuid")).run(text)) == expected


def test_unknown_formats_are_annotations() -> None:
    assert format_pattern("credit-card") is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.text("abé_", max_size=5), st.sampled_from(["one", "two", ("name", 3)])),
        max_size=8,
    ),
    st.booleans(),
    st.lists(st.text("abcé_", max_size=6), max_size=5),
)
def test_literal_automata_are_minimal_and_accept_their_strings(
    strings: list[tuple[str, object]], with_others: bool, probes: list[str]
) -> None:
    others = ("region", frozenset()) if with_others else None
    dfa = literal_dfa(strings, others)
    assert minimize(dfa) == dfa  # already minimal, and numbered as minimize numbers
    expected: dict[str, set[object]] = {}
    for text, tag in strings:
        expected.setdefault(text, set()).add(tag)
    for text in [text for text, _ in strings] + probes:
        tags = expected.get(text, {others} if with_others else set())
        assert dfa.run(text) == frozenset(tags)


_RANGE_LISTS = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 40)).map(lambda r: (min(r), max(r))), max_size=5
)


@given(_RANGE_LISTS, _RANGE_LISTS)
def test_range_intersection_and_difference_are_set_operations(left, right) -> None:
    def points(ranges) -> set[int]:
        return {point for low, high in ranges for point in range(low, high + 1)}

    both = intersect_ranges(tuple(left), tuple(right))
    assert points(both) == points(left) & points(right)
    assert both == normalize(both)
    assert points(subtract_ranges(tuple(left), tuple(right))) == points(left) - points(right)
