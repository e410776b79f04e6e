"""The Python grammar against the interpreter's own parser on hand-picked cases: every
statement and expression form, targets, parameters and arguments, soft keywords, string
and number literals, f-strings, indentation, line joining."""

from __future__ import annotations

import pytest

from bench.syntax import python_parses
from cad.grammar.syntax.python_syntax import python_syntax
from tests.grammar.syntax.conftest import RUNNING

CASES = [
    # statements
    "x = 1\n", "x: int\n", "x: int = 1\n", "(a): int\n", "a.b: int = 3\n", "[a]: int\n",
    "a = b = c\n", "a, b = c\n", "a, *b = c\n", "*a, = x\n", "*a = x\n", "[*a, *b] = x\n",
    "(*a) = 1\n", "() = x\n", "[] = x\n", "f() = 1\n", "a + 1 = 2\n", "a, b += 1\n",
    "(a) += 1\n", "a.b[c] += 1\n", "x = yield\n", "x = *a, *b\n", "a = *b\n",
    "del a, b.c, d[e]\n", "del ()\n", "del (a, *b)\n", "del f()\n", "del [a, [b]]\n",
    "return\n", "return *a, b\n", "raise\n", "raise x from y\n", "assert x, y\n",
    "global x, y\n", "nonlocal x\n", "pass; pass\n", "x = 1;\n", "x = 1;;\n", ";\n",
    "import a.b as c, d\n", "from . import x\n", "from .. import x\n", "from ...a import b\n",
    "from a import (b, c,)\n", "from a import b,\n", "from a import *\n", "from a import (*)\n",
    "break\n", "continue\n", "await x\n",
    # compound statements
    "if x:\n    pass\nelif y:\n    pass\nelse:\n    pass\n", "if x: pass; pass\n",
    "if x: if y: pass\n", "while x:\n    pass\nelse:\n    pass\n",
    "for x, (y, z) in w:\n    pass\n", "for f() in x: pass\n", "for (a+b).c in x: pass\n",
    "for x in *a, b: pass\n", "try:\n    pass\nexcept* E:\n    pass\n",
    "try:\n    pass\nexcept (A, B) as e:\n    pass\nelse:\n    pass\nfinally:\n    pass\n",
    "try:\n    pass\nelse:\n    pass\n", "try:\n    pass\nfinally:\n    pass\n",
    "with a as b, c as d: pass\n", "with (a as b, c): pass\n", "with (a, b) as c: pass\n",
    "with (a := 1, b as c): pass\n", "with (yield): pass\n", "with (): pass\n",
    "async def f():\n    async with a as b:\n        await c\n    async for x in y:\n        pass\n",
    "@x.y[0](1)\nclass C(A, metaclass=M):\n    '''doc'''\n",
    "@property\ndef f(self) -> int: ...\n", "class C(): pass\n",
    # parameters and arguments
    "def f(a, b=1, *c, d, e=2, **f): pass\n", "def f(a, /, b, *, c): pass\n",
    "def f(a=1, b): pass\n", "def f(*, **k): pass\n", "def f(*): pass\n", "def f(*,): pass\n",
    "def f(/, a): pass\n", "def f(a, /, /): pass\n", "def f(*a, *b): pass\n",
    "def f(**a, b): pass\n", "def f(a, *, b=1, c): pass\n", "def f(a,): pass\n",
    "def f(**k,): pass\n", "def f(a: int = 1, *args: str, **kw: dict) -> None: pass\n",
    "f(a=1, b)\n", "f(**a, *b)\n", "f(*a, b=1, *c, **d, e=2)\n", "f(x for x in y)\n",
    "f(x for x in y, )\n", "f(a, x for x in y)\n", "f(a := 1)\n", "f(a=b := 1)\n",
    "f(b=1, *a)\n", "f(*a, b)\n", "f(**a, b=1)\n", "f(a)(b)[c].d\n",
    "x = lambda *a, b=1, **c: 0\n", "x = lambda a, /, b: 0\n", "lambda: x = 1\n",
    "x = lambda: (yield)\n",
    # expressions
    "x = a if b else c if d else e\n", "x = 1 if 2\n", "x = not not y\n", "x = ~-+y\n",
    "x = a is not b not in c\n", "x = a < b <= c\n", "x = a @ b ** -c // d\n",
    "x = {**a, 'b': 1}\n", "x = {*a, 1}\n", "x = {a: b for c in d}\n", "x = {**a for b in c}\n",
    "x = [i async for i in y]\n", "x = [a for b in c, d]\n", "x = (a for b in c if d if e)\n",
    "x = (a := 1, b := 2)\n", "x = a := 1\n", "a[b := 1]\n", "a[b := 1, c]\n",
    "x[1:2:3, ::, :]\n", "x[*a]\n", "x[a, *b] = 1\n", "x = ...\n", "x = a.b.c(d)[e].f\n",
    "print((yield))\n", "x = (yield from y)\n", "not\n", "x = (1,)\n", "x = (1)\n", "x = ()\n",
    # soft keywords
    "match = 1\n", "match(x)\n", "match[x]: int\n", "match.x = 1\n", "case = 1\n", "type = 1\n",
    "type(x)\n", "print(match, case, type, _)\n",
    "match x:\n    case 1 | 2: pass\n    case [a, *_]: pass\n    case {'k': v, **r}: pass\n",
    "match x, y:\n    case Point(x=0) | None: pass\n    case (a as b) | c: pass\n",
    "match x:\n    case -1-2j: pass\n    case 1+2: pass\n", "match x:\n    case 1j+2j: pass\n",
    "match x:\n    case y as _: pass\n", "match x:\n    case {**_}: pass\n",
    "match x:\n    case _.a: pass\n", "match x:\n    case C(_=1): pass\n",
    "match x:\n    case {**r, 1: a}: pass\n", "match -x:\n    case _: pass\n",
    # literals
    "x = 1_000.5e-3j + 0o17 + 0b1 + 0xFF\n", "x = 01\n", "x = 00\n", "x = 1__0\n",
    "x = 0_0\n", "x = .5 + 5. + 1e5 + 1E+5J\n", "x = 1if y else 2\n", "x = 1else\n",
    "x = 0x1for\n", "x = 1 .real\n", "x = 1..real\n", "x = 'a' 'b' \"c\"\n",
    "x = 'a' b'b'\n", "x = b'a' rb'\\\\' Rb'c'\n", "x = b'\\u1234'\n", "x = b'\\xe9'\n",
    "x = '\\x4'\n", "x = '\\N{BULLET}'\n", "x = '\\U00110000'\n", "x = '\\U0010ffff'\n",
    "x = rb'\\\\'\n", "x = r'\\''\n", "x = '''a\n'b'\n'''\n", "x = 'a\nb'\n", "x = 'a\\\nb'\n",
    "x = u'a' U'b'\n", "x = ur'a'\n", "x = \"\"\"\"a\"\"\"\n",
    # f-strings that read the same before and after PEP 701
    "x = f'{a!r:>{w}} {b}'\n", "x = f'{x=}'\n", "x = f'{x = !r:10}'\n", "x = f'{{}}'\n",
    "x = f'{}'\n", "x = f'{x!}'\n", "x = f'{x:{y:{z}}}'\n", "x = f'{x:{y:{z:{w}}}}'\n",
    "x = f'{x}}'\n", "x = f'}'\n", "x = f'{'\n", "x = f'{(lambda x: 1)}'\n",
    "x = f'{lambda x: 1}'\n", "x = f'{x,}'\n", "x = f'{yield}'\n", "x = f'{x!r!s}'\n",
    "x = f'{x:%H:%M}' F'{y}' rf'\\{z}'\n", "x = f'{x}' 'a' b'c'\n", "x = f'a' 'b'\n",
    # layout
    "if True:\n\tx = 1\n        y = 2\n", "if 1:\n    x\n\ty\n", "if 1:\n  x\n \\\n  y\n",
    "if 1:\n  x\n  \\\ny\n", "\\\nx = 1\n", " \\\nx\n", "\\\n", "x\\\n", "x = (\n1,\n)\n",
    "x = 1 \\\n + 2\n", "if x:\n    pass\n  # comment\n", "\x0cx = 1\n", "if 1:\n\x0c  x\n  y\n",
    "if x:\n    pass\n   pass\n", "  x = 1\n", "if x:\npass\n", "x = 1\n    y = 2\n",
    "x = (1,\n  2\n", "x = 1 # c \\\n", "def f():\n    return\n\n\n\n", "", "\n\n", "# only\n",
    "x = 1", "if x:\n    pass", "x = (", "x = 1\r\ny = 2\r\n", "x = 1\ry = 2\r",
]  # fmt: skip


@pytest.mark.parametrize("text", CASES)
def test_grammar_agrees_with_the_interpreter(text: str) -> None:
    syntax = python_syntax(RUNNING)
    assert syntax.accepts(text.encode()) == python_parses(text)


NEWER = [
    ("type X = int\n", (3, 12)),
    ("type X[T] = list[T]\n", (3, 12)),
    ("def f[T: int, *Ts, **P](x: T) -> T: pass\n", (3, 12)),
    ("class C[T]: pass\n", (3, 12)),
    ("x = f'{a['b']}'\n", (3, 12)),
    ("x = f'{f'{x}'}'\n", (3, 12)),
    ("x = f'{x!r }'\n", (3, 12)),
    ("x = f'{'\\n'.join(y)}'\n", (3, 12)),
    ("x = f'{x # c\n}'\n", (3, 12)),
    ("def f[T=int, U](): pass\n", (3, 13)),
    ("class C[**P=[int]]: pass\n", (3, 13)),
    ("try:\n    pass\nexcept* E:\n    pass\n", (3, 11)),
    ("x[*a]\n", (3, 11)),
    ("def f(*args: *Ts): pass\n", (3, 11)),
]


@pytest.mark.parametrize(("text", "since"), NEWER)
def test_newer_syntax_is_accepted_from_its_version(text: str, since: tuple[int, int]) -> None:
    assert python_syntax((3, 13)).accepts(text.encode())
    if since > (3, 10) and "f'" not in text:
        assert not python_syntax((since[0], since[1] - 1)).accepts(text.encode())


def test_bytes_that_are_not_utf8_or_hold_nul_are_refused() -> None:
    syntax = python_syntax(RUNNING)
    assert not syntax.accepts(b"x = '\xff'\n")
    assert not syntax.accepts(b"x = '\x00'\n")
    assert syntax.accepts("x = 'é' # ü\nnaïve = 1\n".encode())
    assert not syntax.accepts("€ = 1\n".encode())


def test_a_prefix_is_viable_exactly_when_some_file_starts_with_it() -> None:
    syntax = python_syntax(RUNNING)
    viable = ["def f(", "x = '", "if x:\n", "if x:\n    y\n  ", "x = 1 #", "f'{", "(\n\n"]
    dead = ["def f(:", "x = 1 1", "if x:\ny", "x = #", "else:", "f'}'", ")", "x = 1\n  y"]
    for text in viable:
        state = syntax.feed(syntax.initial, text.encode())
        assert state >= 0 and syntax.is_viable(state), text
    for text in dead:
        state = syntax.feed(syntax.initial, text.encode())
        assert state < 0 or not syntax.is_viable(state), text
