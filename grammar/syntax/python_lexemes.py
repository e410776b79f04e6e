"""Python's lexemes as byte patterns, from the language reference's lexical analysis chapter.

Three kinds of automata, one per lexer mode (see :mod:`cad.grammar.syntax.python_lexer`):

* **code** — every token of ordinary code: ``NAME``, the hard keywords and the soft keywords
  (``match``, ``case``, ``type``, ``_``) by their text, ``INT`` (a nonzero decimal integer),
  ``NUMBER`` (the other numbers: PEP 515 underscores, floats, imaginary), ``STRING`` (str literals, every prefix), ``BYTES``, the opening of an f-string
  (``FSTART`` plus its quote kind), ``FEMPTY`` (``f""``), every operator, ``CONV`` (``!r``,
  ``!s``, ``!a``, only valid inside an f-string's replacement field), and the layout lexemes
  ``SP``, ``TAB``, ``FF``, ``NL`` (``\\n``, ``\\r\\n``, ``\\r``), ``COMMENT`` and ``CONT`` (a
  backslash joining two lines);
* **f-string text** (one per quote, triple or not, raw or not) — ``FMID`` (literal text,
  escapes, ``{{`` and ``}}``), ``FOPEN`` (``{``), ``FEND`` (the closing quote), ``FLONE``
  (a single ``}``, an error);
* **format spec** (one per quote, triple or not) — ``FMID`` (spec text and ``{{``), ``FOPEN``
  and ``FCLOSE``.

String contents are validated as the compiler does: ``\\x``, ``\\u``, ``\\U`` and ``\\N{...}``
escapes must be complete (``\\N`` names are checked for their characters only), bytes
literals are ASCII, single-quoted literals end on their line. Bytes at or above 0x80 inside
strings and comments are taken as they come; UTF-8 validity is checked beside the lexer.
Identifiers are checked against Unicode's identifier classes after NFKC, as the tokenizer
does, byte by byte.
"""

from __future__ import annotations

import unicodedata
from functools import cache

from cad.grammar.cfg.utf8_ranges import utf8_sequences
from cad.grammar.syntax.lexer_dfa import (
    Dfa,
    Pattern,
    alt,
    any_byte_except,
    build_dfa,
    byte_range,
    byte_set,
    opt,
    plus,
    repeat,
    seq,
    star,
    text,
)

KEYWORDS = (
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
    "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
    "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
    "return", "try", "while", "with", "yield",
)  # fmt: skip
SOFT_KEYWORDS = ("match", "case", "type")
OPERATORS = (
    "+", "-", "*", "**", "/", "//", "%", "@", "<<", ">>", "&", "|", "^", "~", ":=", "<", ">",
    "<=", ">=", "==", "!=", "(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "=", "->",
    "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", ">>=", "<<=", "**=", "...",
)  # fmt: skip
QUOTE_KINDS = (("'", False), ('"', False), ("'''", True), ('"""', True))
_NUL = 0
_NEWLINE_BYTES = b"\r\n"
_DIGIT = byte_range(0x30, 0x39)
_HEX = byte_set(b"0123456789abcdefABCDEF")
_NEWLINE = alt(text("\n"), seq(text("\r"), opt(text("\n"))))
_HIGH = bytes(range(0x80, 0x100))

_STR_PREFIXES = ("", "u", "U")
_RAW_STR_PREFIXES = ("r", "R")
_BYTES_PREFIXES = ("b", "B")
_RAW_BYTES_PREFIXES = ("br", "bR", "Br", "BR", "rb", "rB", "Rb", "RB")
_F_PREFIXES = ("f", "F")
_RAW_F_PREFIXES = ("fr", "fR", "Fr", "FR", "rf", "rF", "Rf", "RF")


def fstart_label(quote: str, raw: bool) -> str:
    """The code-mode label of an f-string opening with ``quote`` (``'``, ``\"``, ``'''`` or
    ``\"\"\"``), raw or not."""
    return f"FSTART{'r' if raw else ''}{quote}"


@cache
def _identifier_ranges(continuing: bool) -> tuple[tuple[int, int], ...]:
    """Non-ASCII code points allowed at the start (or inside) an identifier, after NFKC as
    the tokenizer applies it, as merged ranges."""
    ranges: list[tuple[int, int]] = []
    start = None
    for code in range(0x80, 0x110000):
        if 0xD800 <= code <= 0xDFFF:
            ok = False
        else:
            normal = unicodedata.normalize("NFKC", chr(code))
            ok = ("a" + normal).isidentifier() if continuing else normal.isidentifier()
        if ok and start is None:
            start = code
        elif not ok and start is not None:
            ranges.append((start, code - 1))
            start = None
    if start is not None:
        ranges.append((start, 0x10FFFF))
    return tuple(ranges)


def _code_points(ranges: tuple[tuple[int, int], ...]) -> Pattern:
    """One UTF-8 encoded code point out of ``ranges``, as a prefix tree of byte ranges (the
    sequences share their leading ranges, which keeps the automaton small to build)."""
    return _range_tree([tuple(part) for part in utf8_sequences(ranges)])


def _range_tree(sequences: list[tuple[tuple[int, int], ...]]) -> Pattern:
    groups: dict[tuple[int, int], list[tuple[tuple[int, int], ...]]] = {}
    for sequence in sequences:
        groups.setdefault(sequence[0], []).append(sequence[1:])
    options = []
    for (low, high), rests in groups.items():
        tails = [rest for rest in rests if rest]
        head = byte_range(low, high)
        if not tails:
            options.append(head)
        elif len(tails) == len(rests):
            options.append(seq(head, _range_tree(tails)))
        else:
            options.append(seq(head, opt(_range_tree(tails))))
    return alt(*options)


def _identifier() -> Pattern:
    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
    first = alt(byte_set(letters), _code_points(_identifier_ranges(False)))
    rest = alt(byte_set(letters + b"0123456789"), _code_points(_identifier_ranges(True)))
    return seq(first, star(rest))


def _decimal() -> Pattern:
    """A nonzero decimal integer literal: the one kind of number whose digits are counted
    (see ``MAX_INT_DIGITS`` in :mod:`python_lexer`)."""
    return seq(byte_range(0x31, 0x39), star(seq(opt(text("_")), _DIGIT)))


def _number() -> Pattern:
    """The other integer literals (zero, binary, octal, hexadecimal) and float literals
    (nonzero decimal integers are :func:`_decimal`, imaginary ones :func:`_imaginary`)."""

    def digits(allowed: Pattern) -> Pattern:
        return seq(allowed, star(seq(opt(text("_")), allowed)))

    zero = seq(plus(text("0")), star(seq(opt(text("_")), text("0"))))
    prefixed = [
        seq(text("0"), byte_set(marker), plus(seq(opt(text("_")), allowed)))
        for marker, allowed in (
            (b"bB", byte_set(b"01")),
            (b"oO", byte_range(0x30, 0x37)),
            (b"xX", _HEX),
        )
    ]
    digit_part = digits(_DIGIT)
    fraction = seq(text("."), digit_part)
    exponent = seq(byte_set(b"eE"), opt(byte_set(b"+-")), digit_part)
    point_float = alt(seq(opt(digit_part), fraction), seq(digit_part, text(".")))
    float_number = alt(point_float, seq(alt(digit_part, point_float), exponent))
    return alt(zero, *prefixed, float_number)


def _imaginary() -> Pattern:
    digit_part = seq(_DIGIT, star(seq(opt(text("_")), _DIGIT)))
    fraction = seq(text("."), digit_part)
    exponent = seq(byte_set(b"eE"), opt(byte_set(b"+-")), digit_part)
    point_float = alt(seq(opt(digit_part), fraction), seq(digit_part, text(".")))
    float_number = alt(point_float, seq(alt(digit_part, point_float), exponent))
    return seq(alt(float_number, digit_part), byte_set(b"jJ"))


def _escape(kind: str, excluded: bytes = b"") -> Pattern:
    """A backslash escape in a non-raw literal: complete ``\\x``/``\\u``/``\\U``/``\\N{}``
    forms, a line continuation, or any other character (kept, with a warning); ``excluded``
    bytes may not follow the backslash (an f-string's braces)."""
    backslash = text("\\")
    if kind == "bytes":
        other = any_byte_except(bytes([_NUL]) + _NEWLINE_BYTES + b"x" + _HIGH + excluded)
        return seq(backslash, alt(_NEWLINE, seq(text("x"), _HEX, _HEX), other))
    name_chars = byte_set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 -")
    big = alt(seq(text("000"), repeat(_HEX, 5)), seq(text("0010"), repeat(_HEX, 4)))
    other = any_byte_except(bytes([_NUL]) + _NEWLINE_BYTES + b"xuUN" + excluded)
    return seq(
        backslash,
        alt(
            _NEWLINE,
            seq(text("x"), _HEX, _HEX),
            seq(text("u"), repeat(_HEX, 4)),
            seq(text("U"), big),
            seq(text("N{"), plus(name_chars), text("}")),
            other,
        ),
    )


def _raw_pair(excluded: bytes = b"") -> Pattern:
    """A backslash and the byte it protects in a raw literal (both stay as written)."""
    return seq(text("\\"), any_byte_except(bytes([_NUL]) + excluded))


def _closed(quote: str, triple: bool, item: Pattern) -> Pattern:
    """Content items then the closing quote(s); in a triple-quoted literal one or two quotes
    may appear inside."""
    q = text(quote)
    if not triple:
        return seq(star(item), q)
    return seq(star(alt(item, seq(q, item), seq(q, q, item))), q, q, q)


def _string_body(kind: str, raw: bool, quote: str, triple: bool) -> Pattern:
    """What follows the opening quote of a str or bytes literal, closing quote included."""
    forbidden = bytes([_NUL]) + quote.encode() + b"\\"
    if not triple:
        forbidden += _NEWLINE_BYTES
    if kind == "bytes":
        forbidden += _HIGH
    plain = any_byte_except(forbidden)
    pair = _raw_pair(_HIGH if kind == "bytes" else b"") if raw else _escape(kind)
    return _closed(quote, triple, alt(plain, pair))


def _prefixed(prefixes: tuple[str, ...], opener: str, body: Pattern) -> Pattern:
    return seq(alt(*(text(p + opener) for p in prefixes)), body)


def _strings(kind: str, raw: bool, prefixes: tuple[str, ...]) -> Pattern:
    return alt(
        *(
            _prefixed(prefixes, quote, _string_body(kind, raw, quote[0], triple))
            for quote, triple in QUOTE_KINDS
        )
    )


@cache
def code_lexer() -> Dfa:
    """The automaton for ordinary code (and for the expressions of replacement fields)."""
    rules: list[tuple[str, Pattern]] = []
    rules += [(keyword, text(keyword)) for keyword in KEYWORDS + SOFT_KEYWORDS]
    rules.append(("_", text("_")))
    rules.append(("STRING", _strings("str", False, _STR_PREFIXES)))
    rules.append(("STRING", _strings("str", True, _RAW_STR_PREFIXES)))
    rules.append(("BYTES", _strings("bytes", False, _BYTES_PREFIXES)))
    rules.append(("BYTES", _strings("bytes", True, _RAW_BYTES_PREFIXES)))
    for quote, triple in QUOTE_KINDS:
        for raw, prefixes in ((False, _F_PREFIXES), (True, _RAW_F_PREFIXES)):
            rules.append(
                (fstart_label(quote, raw), seq(alt(*(text(p) for p in prefixes)), text(quote)))
            )
            if not triple:
                rules.append(("FEMPTY", seq(alt(*(text(p) for p in prefixes)), text(quote * 2))))
    rules.append(("NAME", _identifier()))
    rules.append(("INT", _decimal()))
    rules.append(("NUMBER", _number()))
    rules.append(("IMAG", _imaginary()))
    rules += [(op, text(op)) for op in OPERATORS]
    # two dots are two '.' tokens; as one lexeme they keep maximal munch from stalling on
    # the way to '...' (``from .. import x``)
    rules.append(("..", text("..")))
    rules.append(("CONV", seq(text("!"), byte_set(b"rsa"))))
    rules += [
        ("SP", text(" ")),
        ("TAB", text("\t")),
        ("FF", text("\f")),
        ("NL", _NEWLINE),
        ("COMMENT", seq(text("#"), star(any_byte_except(bytes([_NUL]) + _NEWLINE_BYTES)))),
        ("CONT", seq(text("\\"), _NEWLINE)),
    ]
    return build_dfa(rules)


def _literal_rules(quote: str, triple: bool, middle: Pattern) -> list[tuple[str, Pattern]]:
    """Rules shared by f-string text and format specs: the text runs (``middle``, which
    holds no brace and no quote), doubled braces, quotes that do not close a triple-quoted
    literal, and the closing quote(s)."""
    q = text(quote)
    rules = [("FMID", middle), ("FMID", text("{{")), ("FOPEN", text("{"))]
    if triple:
        rules += [("FMID", q), ("FMID", seq(q, q)), ("FEND", seq(q, q, q))]
    else:
        rules.append(("FEND", q))
    return rules


def _literal_text(quote: str, triple: bool, raw: bool) -> Pattern:
    """A run of f-string literal text (escapes as in a string, raw or not, braces excluded);
    a backslash right before a brace stays a literal backslash and the brace keeps its role."""
    forbidden = bytes([_NUL]) + quote.encode() + b"\\{}"
    if not triple:
        forbidden += _NEWLINE_BYTES
    plain = any_byte_except(forbidden)
    pair = _raw_pair(b"{}") if raw else _escape("str", b"{}")
    return alt(seq(plus(alt(plain, pair)), opt(text("\\"))), text("\\"))


@cache
def fstring_lexer(quote: str, triple: bool, raw: bool) -> Dfa:
    """The automaton for the literal text of an f-string opened with ``quote`` (one
    character), triple-quoted or not, raw or not."""
    rules = _literal_rules(quote, triple, _literal_text(quote, triple, raw))
    rules += [("FMID", text("}}")), ("FLONE", text("}"))]
    return build_dfa(rules)


@cache
def spec_lexer(quote: str, triple: bool) -> Dfa:
    """The automaton for a format spec inside an f-string opened with ``quote``."""
    forbidden = bytes([_NUL]) + quote.encode() + b"{}"
    if not triple:
        forbidden += _NEWLINE_BYTES
    rules = _literal_rules(quote, triple, plus(any_byte_except(forbidden)))
    rules.append(("FCLOSE", text("}")))
    return build_dfa(rules)


@cache
def legacy_spec_lexer(quote: str, triple: bool, raw: bool) -> Dfa:
    """The automaton for a format spec before Python 3.12, where a spec was read as the
    literal text of a nested f-string: escapes as in the f-string (raw or not), no doubled
    braces (``{`` always opens a field, ``}`` always closes the spec)."""
    middle = _literal_text(quote, triple, raw)
    q = text(quote)
    rules = [("FMID", middle), ("FOPEN", text("{")), ("FCLOSE", text("}"))]
    if triple:
        rules += [("FMID", q), ("FMID", seq(q, q)), ("FEND", seq(q, q, q))]
    else:
        rules.append(("FEND", q))
    return build_dfa(rules)
