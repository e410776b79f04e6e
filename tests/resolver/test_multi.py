"""Multi-file programs: single-file programs unchanged, exact round trips over any set of
files, minimal oracle programs that copy across files, one-line errors with positions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad.resolver import (
    CopyFrom,
    CopyLines,
    CopySpan,
    CreateFile,
    DeleteFile,
    EditFile,
    Gen,
    IncrementalMultiResolver,
    MultiProgram,
    Program,
    ProgramError,
    Workspace,
    apply_changes,
    format,
    format_file_op,
    format_multi,
    oracle,
    oracle_multi,
    parse,
    parse_multi,
    path_problem,
    per_file_programs,
    resolve,
    resolve_multi,
    split_lines,
)
from tests.conftest import TOKENIZERS

_PIECES = [
    "x\n",
    "y\n",
    "x\r\n",
    "z\r",
    "é\n",
    "  x\n",
    "\n",
    "w",
    "<",
    "/gen>",
    "\\",
    "def f():\n",
]
texts = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)
paths = st.sampled_from(["a.py", "b.py", "pkg/c.py", "d e.txt", "pkg/sub/é.py"])

copies = st.one_of(
    st.builds(lambda a, b: CopyLines(min(a, b), max(a, b)), st.integers(1, 30), st.integers(1, 30)),
    st.builds(
        lambda a, b: CopySpan(*min(a, b), *max(a, b)),
        st.tuples(st.integers(1, 9), st.integers(1, 9)),
        st.tuples(st.integers(1, 9), st.integers(1, 9)),
    ),
)
own_ops = st.one_of(copies, st.builds(Gen, texts))
file_ops = st.one_of(own_ops, st.builds(CopyFrom, st.integers(1, 12), copies))
foreign_ops = st.one_of(st.builds(Gen, texts), st.builds(CopyFrom, st.integers(1, 12), copies))


@st.composite
def multi_programs(draw: st.DrawFn) -> MultiProgram:
    """Programs whose sections name distinct files and paths."""
    files = draw(st.lists(st.integers(1, 12), unique=True, max_size=4))
    created = draw(st.lists(paths, unique=True, max_size=2))
    sections = []
    for file in files:
        if draw(st.booleans()):
            sections.append(EditFile(file, tuple(draw(st.lists(file_ops, max_size=4)))))
        else:
            sections.append(DeleteFile(file))
    sections += [CreateFile(p, tuple(draw(st.lists(foreign_ops, max_size=3)))) for p in created]
    return MultiProgram(tuple(draw(st.permutations(sections))))


workspaces = st.dictionaries(paths, texts, max_size=3)


@st.composite
def edits(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    """A set of files and what an edit makes of it: files kept, changed (often by moving
    text from another file), dropped or added."""
    before = draw(workspaces)
    pool = "".join(before.values())
    after: dict[str, str] = {}
    for path, text in before.items():
        choice = draw(st.sampled_from(["keep", "change", "drop", "take"]))
        if choice == "keep":
            after[path] = text
        elif choice == "change":
            after[path] = draw(texts)
        elif choice == "take":
            start = draw(st.integers(0, len(pool)))
            after[path] = text + pool[start : start + draw(st.integers(0, 40))] + draw(texts)
    for path in draw(st.lists(paths, max_size=2)):
        if path not in before:
            after[path] = draw(texts) + pool[: draw(st.integers(0, len(pool)))]
    return before, after


def test_a_single_file_program_is_a_bare_multi_file_program() -> None:
    text = '<copy lines="1-1"/>\n<gen>z\n</gen>\n<copy span="2:1-2:2"/>\n</program>'
    program = parse(text)
    multi = parse_multi(text)
    assert multi == MultiProgram.single(program) and multi.is_bare
    assert format_multi(multi) == format(program) == text
    assert resolve_multi(multi, {"f.txt": "a\nbc\n"}) == {"f.txt": resolve(program, "a\nbc\n")}


@settings(max_examples=200, deadline=None)
@given(program=st.lists(own_ops, max_size=8), document=texts)
def test_every_single_file_program_parses_and_resolves_the_same(
    program: list, document: str
) -> None:
    single = Program(tuple(program))
    text = format(single)
    assert format_multi(parse_multi(text)) == text
    assert parse_multi(text) == MultiProgram.single(parse(text))
    try:
        expected: str | ProgramError = resolve(single, document)
    except ProgramError as error:
        expected = error
    try:
        got: str | ProgramError = resolve_multi(parse_multi(text), {"doc": document})["doc"]  # type: ignore[assignment]
    except ProgramError as error:
        got = error
    if isinstance(expected, ProgramError):
        assert isinstance(got, ProgramError) and str(got) == str(expected)
    else:
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(program=multi_programs())
def test_parse_multi_inverts_format_multi(program: MultiProgram) -> None:
    if not program.sections:
        with pytest.raises(ValueError):
            format_multi(program)
        return
    assert parse_multi(format_multi(program)) == program


@settings(max_examples=300, deadline=None)
@given(edit=edits(), granularity=st.sampled_from(["line", "subline"]))
def test_oracle_multi_round_trips_any_set_of_files(
    edit: tuple[dict[str, str], dict[str, str]], granularity: str
) -> None:
    before, after = edit
    if not before and not after:
        with pytest.raises(ValueError):
            oracle_multi(before, after)
        return
    for build in (oracle_multi, per_file_programs):
        program = build(before, after, granularity=granularity)  # type: ignore[operator]
        if not program.sections:
            assert before == after
            continue
        parsed = parse_multi(format_multi(program))
        assert parsed == program
        assert apply_changes(before, resolve_multi(parsed, before)) == after


def _occurs(source: list[str], run: list[str]) -> bool:
    return any(source[i : i + len(run)] == run for i in range(len(source) - len(run) + 1))


def _reference_cost(
    sources: list[list[str]], own: int | None, target: list[str], attribute: int
) -> tuple[int, int]:
    """Brute force (cost, ops) over every segmentation of the target: generated characters,
    plus ``attribute`` for each copy that only another file than ``own`` can give."""
    inf = (float("inf"), float("inf"))
    m = len(target)
    copy_end, gen_end = [inf] * (m + 1), [inf] * (m + 1)
    copy_end[0] = (0, 0)
    for end in range(1, m + 1):
        cost = len(target[end - 1])
        gen_end[end] = min(
            (copy_end[end - 1][0] + cost, copy_end[end - 1][1] + 1),
            (gen_end[end - 1][0] + cost, gen_end[end - 1][1]),
        )
        for start in range(end):
            run = target[start:end]
            if own is not None and _occurs(sources[own - 1], run):
                extra = 0
            elif any(_occurs(source, run) for source in sources):
                extra = attribute
            else:
                continue
            best = min(copy_end[start], gen_end[start])
            copy_end[end] = min(copy_end[end], (best[0] + extra, best[1] + 1))
    return min(copy_end[m], gen_end[m])  # type: ignore[return-value]


@settings(max_examples=200, deadline=None)
@given(edit=edits())
def test_each_section_is_minimal_with_copies_from_every_file(
    edit: tuple[dict[str, str], dict[str, str]],
) -> None:
    """Minimal in generated text, a cross-file copy's attribute counted as generated, then
    in ops; never worse than the same edit written file by file."""
    before, after = edit
    if not before and not after:
        return
    program = oracle_multi(before, after)
    per_file = per_file_programs(before, after)
    sources = [split_lines(text) for text in before.values()]
    attribute = len(f' file="{len(before)}"')
    for section in program.sections:
        if isinstance(section, DeleteFile):
            continue
        own = section.file if isinstance(section, EditFile) else None
        path = list(before)[own - 1] if own is not None else section.path
        cost = sum(len(op.text) for op in section.ops if isinstance(op, Gen))
        cost += attribute * sum(isinstance(op, CopyFrom) for op in section.ops)
        expected = _reference_cost(sources, own, split_lines(after[path]), attribute)
        assert (cost, len(section.ops)) == expected
    for multi, alone in zip(program.sections, per_file.sections, strict=False):
        if isinstance(multi, DeleteFile) or isinstance(alone, DeleteFile):
            continue
        gen = [sum(len(op.text) for op in s.ops if isinstance(op, Gen)) for s in (multi, alone)]
        crossing = attribute * sum(isinstance(op, CopyFrom) for op in multi.ops)
        assert (gen[0] + crossing, len(multi.ops)) <= (gen[1], len(alone.ops))


def test_a_moved_function_is_one_copy_and_the_file_it_left_drops_it() -> None:
    helper = "def helper(x):\n    y = x * 2\n    return y + 1\n"
    before = {"app.py": f"import os\n\n\n{helper}\n\ndef main():\n    pass\n", "util.py": "X = 1\n"}
    after = {"app.py": "import os\n\n\ndef main():\n    pass\n", "util.py": f"X = 1\n\n\n{helper}"}
    program = oracle_multi(before, after)
    assert format_multi(program) == (
        '<edit file="1">\n<copy lines="1-1"/>\n<copy lines="7-10"/>\n</edit>\n'
        '<edit file="2">\n<copy lines="1-1"/>\n<copy file="1" lines="2-6"/>\n</edit>\n'
        "</program>"
    )
    assert apply_changes(before, resolve_multi(program, before)) == after
    per_file = format_multi(per_file_programs(before, after))
    assert "<gen>" in per_file and "<copy file=" not in per_file


def test_rename_split_and_delete() -> None:
    """A line is copied across files where it is longer than the file attribute."""
    first, second = "alpha = compute(1)\n", "beta = compute(2)\n"
    before = {"old.py": first + second + "c = 3\n", "gone.py": "x\n"}
    after = {"new.py": first + "c = 3\n", "more.py": second}
    program = oracle_multi(before, after)
    assert program.sections == (
        CreateFile("new.py", (CopyFrom(1, CopyLines(1, 1)), Gen("c = 3\n"))),
        CreateFile("more.py", (CopyFrom(1, CopyLines(2, 2)),)),
        DeleteFile(1),
        DeleteFile(2),
    )
    assert resolve_multi(program, before) == {
        "new.py": after["new.py"],
        "more.py": second,
        "old.py": None,
        "gone.py": None,
    }


def test_text_in_the_own_file_and_another_is_copied_from_the_own_file() -> None:
    shared = "# License: MIT\n# Copyright\n"
    before = {"a.py": shared + "a = 1\n", "b.py": shared + "b = 1\n"}
    after = {"a.py": shared + "a = 2\n", "b.py": shared + "b = 2\n"}
    program = oracle_multi(before, after)
    assert all(
        not isinstance(op, CopyFrom)
        for section in program.sections
        if isinstance(section, EditFile)
        for op in section.ops
    )


def test_nothing_changed_is_the_copy_of_file_one() -> None:
    program = oracle_multi({"a": "x\n", "b": "y\n"}, {"a": "x\n", "b": "y\n"})
    assert program == MultiProgram((EditFile(1, (CopyLines(1, 1),)),))
    with pytest.raises(ValueError, match="no files"):
        oracle_multi({}, {})


def test_the_single_file_oracle_is_the_multi_file_oracle_of_one_file() -> None:
    before, after = "a\nb\nc\n", "a\nB\nc\nd"
    for granularity in ("line", "subline"):
        single = oracle(before, after, granularity=granularity)
        multi = oracle_multi({"f": before}, {"f": after}, granularity=granularity)
        assert format_multi(multi) == format(single)


@settings(max_examples=100, deadline=None)
@given(edit=edits())
def test_incremental_resolver_matches_resolve_multi(
    edit: tuple[dict[str, str], dict[str, str]],
) -> None:
    before, after = edit
    if not before and not after:
        return
    program = oracle_multi(before, after, granularity="subline")
    incremental = IncrementalMultiResolver(before)
    for section in program.sections:
        if isinstance(section, DeleteFile):
            incremental.open(section)
            continue
        header = (
            EditFile(section.file) if isinstance(section, EditFile) else CreateFile(section.path)
        )
        incremental.open(header)
        pieces = [incremental.push(op) for op in section.ops]
        assert incremental.text == "".join(pieces)
        incremental.close()
    assert incremental.changes == resolve_multi(program, before)
    assert incremental.program == program
    whole = IncrementalMultiResolver(before)
    for section in program.sections:
        whole.open(section)
        if not isinstance(section, DeleteFile):
            whole.close()
    assert whole.changes == incremental.changes


@pytest.mark.parametrize(
    ("text", "position", "expected_fragment"),
    [
        ('<edit file="1">\n<copy lines="1-1"/>\n</program>', 36, "'</edit>'"),
        ('<edit file="0"></edit></program>', 12, "a number"),
        (
            '<edit file="1"><copy lines="1-1"/></edit><edit file="1"></edit></program>',
            41,
            "no earlier",
        ),
        ('<delete file="2"/><edit file="2"></edit></program>', 18, "no earlier"),
        ('<create path="a.py"></create><create path="a.py"></create></program>', 29, "no earlier"),
        ('<create path="a.py"><copy lines="1-1"/></create></program>', 20, "a created file"),
        ('<create path="../x.py"></create></program>', 14, "a relative path"),
        ('<create path="/etc/x"></create></program>', 14, "a relative path"),
        ('<create path="a.py></create></program>', 14, "a path and"),
        ('<create path="a.py>"></create></program>', 14, "a relative path"),
        ('<edit file="1"></edit><copy lines="1-1"/></program>', 22, "'<edit', '<create'"),
        ('<copy lines="1-1"/><edit file="1"></edit></program>', 19, "'<copy', '<gen>'"),
        ('<copy file="1" line="1-1"/></program>', 14, "' lines=\"' or ' span=\"'"),
        ('<copy file="x" lines="1-1"/></program>', 12, "a number"),
        ('<delete file="1"></program>', 15, "'\"/>'"),
        ('<edit file="1"></edit></program>x', 32, "nothing after"),
        ("", 0, "'</program>'"),
    ],
)
def test_parse_errors_carry_position_expected_found(
    text: str, position: int, expected_fragment: str
) -> None:
    with pytest.raises(ProgramError) as info:
        parse_multi(text)
    error = info.value
    assert error.position == position, str(error)
    assert expected_fragment in error.expected and expected_fragment in str(error)
    assert "\n" not in str(error)


FILES = {"a.py": "one\ntwo\n", "b.py": "three\n"}


@pytest.mark.parametrize(
    ("program", "message", "section_index", "op_index"),
    [
        (
            '<edit file="3"></edit></program>',
            '<edit file="3">: no file 3: expected a file from 1 to 2',
            0,
            None,
        ),
        (
            '<create path="b.py"></create></program>',
            '<create path="b.py">: expected a new path (to change file 2, <edit file="2">)',
            0,
            None,
        ),
        (
            '<edit file="2"><copy lines="1-1"/></edit><edit file="1"><copy lines="1-3"/></edit>'
            "</program>",
            '<edit file="1"> op 1: <copy lines="1-3"/> is out of range: expected lines within 1-2',
            1,
            0,
        ),
        (
            '<gen>x</gen><copy file="2" lines="2-2"/></program>',
            'op 2: <copy file="2" lines="2-2"/> is out of range: expected lines within 1-1 of '
            "file 2",
            0,
            1,
        ),
        (
            '<copy file="9" span="1:1-1:2"/></program>',
            'op 1: <copy file="9" span="1:1-1:2"/> names no file: expected a file from 1 to 2',
            0,
            0,
        ),
    ],
)
def test_resolve_errors_name_the_section_and_op(
    program: str, message: str, section_index: int, op_index: int | None
) -> None:
    with pytest.raises(ProgramError) as info:
        resolve_multi(parse_multi(program), FILES)
    assert str(info.value).startswith(message), str(info.value)
    assert info.value.section_index == section_index
    assert info.value.op_index == op_index


def test_the_output_of_all_files_together_is_bounded() -> None:
    program = parse_multi(
        '<edit file="1"><copy lines="1-2"/></edit><create path="c"><copy file="1" lines="1-2"/>'
        '<copy file="2" lines="1-1"/></create></program>'
    )
    assert resolve_multi(program, FILES, max_chars=22)["c"] == "one\ntwo\nthree\n"
    with pytest.raises(ProgramError, match="op 2: the output would pass 21 characters") as info:
        resolve_multi(program, FILES, max_chars=21)
    assert info.value.section_index == 1


def test_a_bare_program_needs_a_file() -> None:
    with pytest.raises(ProgramError, match="no file 1: expected a file \\(there are none\\)"):
        resolve_multi(parse_multi("</program>"), {})


def test_incremental_resolver_refuses_and_stays_unchanged() -> None:
    incremental = IncrementalMultiResolver(FILES)
    with pytest.raises(ProgramError):
        incremental.push(Gen("x"))
    incremental.open(EditFile(1))
    assert incremental.push(CopyFrom(2, CopyLines(1, 1))) == "three\n"
    with pytest.raises(ProgramError, match="out of range"):
        incremental.push(CopyLines(3, 3))
    with pytest.raises(ProgramError, match="the end of"):
        incremental.open(DeleteFile(2))
    assert incremental.close() == "three\n"
    with pytest.raises(ProgramError, match="earlier section"):
        incremental.open(DeleteFile(1))
    with pytest.raises(ProgramError, match="out of range"):
        incremental.open(EditFile(2, (Gen("x"), CopyLines(5, 5))))
    assert incremental.text == "" and incremental.changes == {"a.py": "three\n"}
    incremental.open(EditFile(2, (Gen("x"),)))
    assert incremental.close() == "x"


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("pkg/mod.py", None),
        ("a b/é.py", None),
        ("", "an empty path"),
        ("/abs.py", "an absolute path"),
        ("a//b.py", "segment"),
        ("a/./b.py", "segment"),
        ("../b.py", "segment"),
        ('a"b', "the character"),
        ("a\\b", "the character"),
        ("a\nb", "the character"),
        ("x" * 5000, "over 4,096"),
    ],
)
def test_created_paths_are_relative_and_plain(path: str, problem: str | None) -> None:
    found = path_problem(path)
    assert found is None if problem is None else problem in (found or "")


def test_workspace_numbers_files_from_one() -> None:
    workspace = Workspace({"a.py": "x\ny", "b.py": ""})
    assert workspace.numbered() == "[1] a.py (2 lines)\n1|x\n2|y\n[2] b.py (0 lines)\n"
    assert workspace.file_at("./a.py") == 1 and workspace.file_at("c.py") is None
    with pytest.raises(ValueError, match="same path"):
        Workspace([("a", "x"), ("a", "y")])


def test_the_file_attribute_costs_four_qwen2_tokens_cut_where_the_grammar_branches() -> None:
    """What docs/program.md reports: a copy from another file is 4 tokens longer than one
    from the own file, and the tokenizer cuts the attribute at its name, ``="``, each digit
    and the closing quote."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZERS / "qwen2" / "tokenizer.json"))

    def tokens(op: object) -> list[str]:
        text = format_file_op(op) + "\n"  # type: ignore[arg-type]
        return tokenizer.encode(text, add_special_tokens=False).tokens

    own, cross = tokens(CopyLines(10, 42)), tokens(CopyFrom(2, CopyLines(10, 42)))
    assert len(own) == 10 and len(cross) == 14
    assert cross[:6] == ["<", "copy", "Ġfile", '="', "2", '"'] and cross[6:] == own[2:]
    assert len(tokens(CopyFrom(12, CopySpan(3, 5, 9, 1)))) == 17
