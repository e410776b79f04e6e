"""Multi-file program FSM: oracle programs accepted token by token, every accepted program
resolves, bad file ids, ranges, sections and paths refused, forced literals, one file as the
single-file FSM."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cad.grammar import Matcher, MultiProgramMatcher, ProgramMatcher, ProgramTokenIndex, Vocabulary
from cad.resolver import (
    CopyFrom,
    CopyLines,
    CopySpan,
    CreateFile,
    DeleteFile,
    EditFile,
    FileOp,
    Gen,
    MultiProgram,
    Section,
    Workspace,
    apply_changes,
    format_multi,
    oracle_multi,
    parse_multi,
    path_problem,
    resolve_multi,
)

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
paths = st.sampled_from(["a.py", "b.py", "pkg/c.py", "d e.txt", "pkg/sub/é.py", ".x/..y", "f"])

workspaces = st.lists(
    st.tuples(paths, texts), min_size=0, max_size=4, unique_by=lambda pair: pair[0]
)


@pytest.fixture(scope="module")
def index(qwen2_tokenizer) -> ProgramTokenIndex:
    return ProgramTokenIndex.for_tokenizer(qwen2_tokenizer)


@pytest.fixture(scope="module", params=["qwen2_tokenizer", "llama3_tokenizer"])
def any_index(request) -> ProgramTokenIndex:
    """Qwen2 cuts digits apart, Llama-3 has tokens of up to three digits."""
    return ProgramTokenIndex.for_tokenizer(request.getfixturevalue(request.param))


def matcher(
    index: ProgramTokenIndex, files: dict[str, str], editable=None, subline: bool = True
) -> MultiProgramMatcher:
    return MultiProgramMatcher.for_workspace(
        index, Workspace(files), editable=editable, subline=subline
    )


@st.composite
def edits(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    """A set of files and what an edit makes of it: files kept, changed (often by moving
    text from another file), dropped or added."""
    before = draw(st.dictionaries(paths, texts, min_size=1, max_size=4))
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


def written_files(program: MultiProgram, workspace: Workspace) -> set[int]:
    """The files a program edits or deletes (a bare program: file 1)."""
    return {s.file for s in program.sections if isinstance(s, EditFile | DeleteFile)}


def feed_lines(tokenizer, m: MultiProgramMatcher, text: str) -> None:
    """Feed a canonical program as a decoder writes it, line by line, each line's tokens
    checked against the mask before they are accepted."""
    lines = text.split("\n")
    for line in [line + "\n" for line in lines[:-1]] + [lines[-1]]:
        for token in tokenizer.encode(line, add_special_tokens=False):
            assert m.allowed_tokens()[token], (line, tokenizer.decode([token]), m.text[-60:])
            assert m.accept_token(token), (line, token)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edit=edits(), granularity=st.sampled_from(["line", "subline"]), extra=st.randoms())
def test_oracle_programs_are_accepted_token_by_token(
    qwen2_tokenizer, index, edit, granularity: str, extra: random.Random
) -> None:
    before, after = edit
    workspace = Workspace(before)
    program = oracle_multi(workspace, after, granularity=granularity)
    text = format_multi(program)
    # Context files: every file the program leaves alone may or may not be editable.
    editable = written_files(program, workspace) | {
        k for k in range(1, len(workspace) + 1) if extra.random() < 0.5
    }
    m = MultiProgramMatcher.for_workspace(
        index, workspace, editable=editable, subline=granularity == "subline"
    )
    feed_lines(qwen2_tokenizer, m, text)
    assert m.is_accepting() and m.text == text.encode()
    assert m.program == parse_multi(text)
    eos = qwen2_tokenizer.eos_token_id
    assert m.allowed_tokens().nonzero().flatten().tolist() == [eos]
    assert m.accept_token(eos)
    assert apply_changes(before, resolve_multi(m.program, workspace)) == after


@pytest.mark.parametrize("name", ["qwen2_tokenizer", "llama3_tokenizer"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edit=edits())
def test_oracle_programs_decode_with_forced_literals(request, name: str, edit) -> None:
    """As the decoder writes a program in forced-program mode: the forced literals encoded
    and fed in one go, then the longest allowed token that goes on with the program (standing
    in for the model), until ``</program>``; the oracle's program comes out byte for byte."""
    tokenizer = request.getfixturevalue(name)
    before, after = edit
    workspace = Workspace(before)
    target = format_multi(oracle_multi(workspace, after, granularity="subline")).encode()
    m = MultiProgramMatcher.for_workspace(
        ProgramTokenIndex.for_tokenizer(tokenizer), workspace, subline=True
    )
    while not m.is_accepting():
        written = len(m.text)
        forced = m.forced_bytes()
        assert target.startswith(forced, written), (target[written:], forced)
        if forced:
            for token in tokenizer.encode(forced.decode(), add_special_tokens=False):
                assert m.accept_token(token), (forced, token)
            continue
        vocabulary = m.index.vocabulary
        allowed = m.allowed_tokens()
        rest = target[written : written + vocabulary.longest_token]
        token = next(
            vocabulary.ids_by_bytes[rest[:length]]
            for length in range(len(rest), 0, -1)
            if rest[:length] in vocabulary.ids_by_bytes
            and allowed[vocabulary.ids_by_bytes[rest[:length]]]
        )
        assert m.accept_token(token)
    assert m.text == target


segments = st.text(
    st.characters(codec="utf-8", min_codepoint=0x20, exclude_characters='"<>\\/\x7f'),
    min_size=1,
    max_size=6,
).filter(lambda segment: segment not in (".", ".."))
new_paths = st.lists(segments, min_size=1, max_size=3).map("/".join)


def copies_of(draw: st.DrawFn, workspace: Workspace, file: int, subline: bool) -> FileOp:
    """A random copy of file ``file`` (which has lines), lines or (with ``subline``) a span."""
    lines = workspace.document(file).lines
    first = draw(st.integers(1, len(lines)))
    last = draw(st.integers(first, len(lines)))
    if not subline or draw(st.booleans()):
        return CopyLines(first, last)
    start = draw(st.integers(1, len(lines[first - 1])))
    low = start if last == first else 1
    return CopySpan(first, start, last, draw(st.integers(low, len(lines[last - 1]))))


@st.composite
def valid_programs(draw: st.DrawFn) -> tuple[Workspace, set[int], bool, MultiProgram]:
    """A workspace, its editable files and any canonical program valid for them: sections in
    any order, copies of every kind from any file (the own file's without a file), gen text
    of any kind, created paths of any characters the resolver allows."""
    workspace = Workspace(draw(workspaces))
    n = len(workspace)
    editable = draw(st.sets(st.integers(1, n))) if n else set()
    subline = draw(st.booleans())
    sources = [k for k in range(1, n + 1) if workspace.document(k).n_lines]

    def ops(own: int | None) -> tuple[FileOp, ...]:
        result: list[FileOp] = []
        for _ in range(draw(st.integers(0, 4))):
            others = [k for k in sources if k != own]
            kinds = ["gen"] + (["own"] if own in sources else []) + (["other"] if others else [])
            kind = draw(st.sampled_from(kinds))
            if kind == "gen":
                result.append(Gen(draw(texts)))
            elif kind == "own":
                result.append(copies_of(draw, workspace, own, subline))  # type: ignore[arg-type]
            else:
                other = draw(st.sampled_from(others))
                result.append(CopyFrom(other, copies_of(draw, workspace, other, subline)))
        return tuple(result)

    if 1 in editable and draw(st.booleans()):
        return workspace, editable, subline, MultiProgram((EditFile(1, ops(1)),))
    named = draw(
        st.lists(st.sampled_from(sorted(editable)), unique=True) if editable else st.just([])
    )
    sections: list[Section] = [
        EditFile(k, ops(k)) if draw(st.booleans()) else DeleteFile(k) for k in named
    ]
    created = draw(st.lists(new_paths, unique=True, max_size=2))
    sections += [CreateFile(path, ops(None)) for path in created if workspace.file_at(path) is None]
    if not sections:
        sections.append(
            CreateFile("new", ops(None)) if workspace.file_at("new") is None else DeleteFile(1)
        )
    return workspace, editable, subline, MultiProgram(tuple(draw(st.permutations(sections))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=valid_programs())
def test_every_valid_canonical_program_is_accepted(qwen2_tokenizer, index, case) -> None:
    """Not only the oracle's programs: any canonical program the resolver takes for these
    files is accepted token by token."""
    workspace, editable, subline, program = case
    if program.sections == (DeleteFile(1),) and 1 not in editable:
        return
    text = format_multi(program)
    resolve_multi(program, workspace)
    m = MultiProgramMatcher.for_workspace(index, workspace, editable=editable, subline=subline)
    feed_lines(qwen2_tokenizer, m, text)
    assert m.is_accepting() and m.program == parse_multi(text)


_SHORT: dict[int, torch.Tensor] = {}


def short_tokens(index: ProgramTokenIndex) -> torch.Tensor:
    """Tokens of at most two bytes: walks prefer them so every structure gets cut."""
    if id(index) not in _SHORT:
        lengths = [len(data or b"xxx") for data in index.vocabulary.token_bytes]
        _SHORT[id(index)] = torch.tensor(lengths) <= 2
    return _SHORT[id(index)]


def random_walk(m: MultiProgramMatcher, rng: random.Random, budget: int) -> bytes:
    """Random allowed tokens (biased towards short ones, with rollbacks), then the
    completion: what a sampling decoder could write. At every step a sample of tokens is
    offered to ``accept_token`` too, which must take exactly the masked ones."""
    for _ in range(budget):
        if m.is_accepting():
            break
        mask = m.allowed_tokens()
        assert mask.any(), m.text
        for token in rng.sample(range(m.vocab_size), 20):
            accepted = m.accept_token(token)
            assert accepted == bool(mask[token]), (m.text, m.index.vocabulary.token_bytes[token])
            if accepted:
                m.rollback(1)
        short = mask & short_tokens(m.index)
        pool = short if rng.random() < 0.7 and bool(short.any()) else mask
        allowed = pool.nonzero().flatten()
        assert m.accept_token(int(allowed[rng.randrange(len(allowed))]))
        if rng.random() < 0.05:
            m.rollback(rng.randint(1, m.history_size))
    if not m.is_accepting():
        assert m.accept_bytes(m.completion_bytes())
    return m.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=workspaces,
    editable=st.sets(st.integers(1, 4)),
    subline=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_every_accepted_program_parses_and_resolves(
    any_index, files, editable: set[int], subline: bool, seed: int
) -> None:
    workspace = Workspace(files)
    editable &= set(range(1, len(workspace) + 1))
    m = MultiProgramMatcher.for_workspace(any_index, workspace, editable=editable, subline=subline)
    text = random_walk(m, random.Random(seed), budget=60).decode("utf-8")
    program = parse_multi(text)
    assert program == m.program
    resolve_multi(program, workspace)
    assert written_files(program, workspace) <= editable
    created = [s.path for s in program.sections if isinstance(s, CreateFile)]
    assert all(path_problem(path) is None for path in created)
    assert len(set(created)) == len(created)


def test_masks_equal_what_accept_token_takes(any_index) -> None:
    """At states of every kind, the mask holds exactly the tokens ``accept_token`` takes (all
    tokens allowed there and a sample of the rest)."""
    index = any_index
    files = {"a.py": "x = 1\ny = 2\n", "b.py": "", "pkg/c.py": "z\r\n" * 12}
    rng = random.Random(5)
    vocabulary = index.vocabulary.size
    prefixes = [
        b"",
        b"<",
        b"<copy ",
        b'<copy file="3',
        b'<copy file="3" ',
        b'<copy file="3" span="1',
        b'<edit file="3">\n',
        b'<edit file="3">\n<copy lines="1',
        b'<delete file="1"/>\n<',
        b'<create path="pkg/',
        b'<create path="pkg/c.p',
        b'<create path="..',
        b'<create path="n\xc3',
        b'<create path="n.py">\n<copy file="',
        b'<create path="n.py">\n</create>\n',
    ]
    for prefix in prefixes:
        m = matcher(index, files, editable={1, 3})
        assert m.accept_bytes(prefix) or not prefix, prefix
        mask = m.allowed_tokens()
        tokens = set(mask.nonzero().flatten().tolist()) | set(rng.sample(range(vocabulary), 3000))
        for token in tokens:
            accepted = m.accept_token(token)
            assert accepted == bool(mask[token]), (prefix, index.vocabulary.token_bytes[token])
            if accepted:
                m.rollback(1)


def test_file_ids_of_many_files_are_held_digit_by_digit(any_index) -> None:
    """With 150 files, some empty and every third one context, file ids are cut by the
    tokenizer's digit tokens anywhere: the mask still equals what ``accept_token`` takes, and
    random programs resolve and name only editable files."""
    files = [(f"m{k}.py", "" if k % 7 == 0 else f"v = {k}\n" * (k % 5 + 1)) for k in range(150)]
    workspace = Workspace(files)
    editable = {k for k in range(1, 151) if k % 3}
    rng = random.Random(11)
    for prefix in (b'<edit file="', b'<edit file="1', b'<edit file="12', b'<delete file="14'):
        m = MultiProgramMatcher.for_workspace(any_index, workspace, editable=editable)
        assert m.accept_bytes(b'<edit file="2">\n</edit>\n' + prefix), prefix
        mask = m.allowed_tokens()
        for token in set(mask.nonzero().flatten().tolist()) | set(rng.sample(range(3000), 1500)):
            accepted = m.accept_token(token)
            assert accepted == bool(mask[token]), (prefix, any_index.vocabulary.token_bytes[token])
            if accepted:
                m.rollback(1)
    for seed in range(6):
        m = MultiProgramMatcher.for_workspace(any_index, workspace, editable=editable)
        program = parse_multi(random_walk(m, random.Random(seed), budget=80).decode("utf-8"))
        resolve_multi(program, workspace)
        assert written_files(program, workspace) <= editable


@pytest.mark.parametrize(
    ("prefix", "refused"),
    [
        (b'<edit file="', [b"0", b"01", b"4", b"2"]),  # no file 0 or 4; file 2 is context
        (b'<delete file="', [b"2", b"9"]),
        (b'<copy file="', [b"0", b"1", b"2", b"4"]),  # own file 1; file 2 has no lines
        (b'<edit file="3">\n<copy file="', [b"3", b"2"]),
        (b'<copy lines="', [b"0", b"3", b"2-1", b"1-3", b"01"]),
        (b'<copy file="3" lines="', [b"13", b"0", b"5-4"]),
        (b'<copy file="3" span="', [b"13", b"1:5", b"2:1-1:"]),
        (b'<edit file="1">\n</edit>\n<edit file="', [b"1"]),
        (b'<edit file="1">\n</edit>\n<delete file="', [b"1"]),
        (b'<delete file="3"/>\n<edit file="', [b"3"]),
        (b'<create path="n.py">\n', [b'<copy lines="', b"</edit>", b"</program>"]),
        (b'<create path="n.py">\n</create>\n<create path="', [b'n.py"']),
        (b'<edit file="1">\n', [b"</program>", b"</create>", b"<edit", b"<delete"]),
        (b'<copy lines="1-1"/>\n', [b"<edit", b"<create", b"</edit>"]),
        (b"", [b"</edit>", b"</create>", b'<copy file="1"']),
    ],
)
def test_bad_ids_ranges_and_sections_are_refused(index, prefix: bytes, refused: list[bytes]):
    files = {"a.py": "x = 1\ny = 2\n", "b.py": "", "pkg/c.py": "zz\r\n" * 12}
    m = matcher(index, files, editable={1, 3}, subline=True)
    if prefix:
        assert m.accept_bytes(prefix), prefix
    for data in refused:
        assert not m.accept_bytes(data), (prefix, data)
        assert m.text == prefix


def test_context_file_one_forbids_the_bare_form(index) -> None:
    m = matcher(index, {"a.py": "x\n", "b.py": "y\n"}, editable={2})
    for data in (b'<copy lines="1-1"/>\n', b"<gen>", b'<copy file="2"', b"</program>"):
        assert not m.accept_bytes(data), data
    assert m.accept_bytes(b'<edit file="2">\n<copy file="1" lines="1-1"/>\n</edit>\n</program>')
    assert m.program == parse_multi(m.text.decode())


@pytest.mark.parametrize(
    "path",
    [
        b"/abs",
        b"a//b",
        b"./a",
        b"a/./b",
        b"a/../b",
        b"..",
        b"a/",
        b"a\\b",
        b"a<b",
        b"a>b",
        b"a\tb",
        b"a\x7fb",
        b"a.py",
        b"d/e.py",
        b"",
        b"\xff",
        b"\xc3(",
    ],
)
def test_bad_paths_are_refused(index, path: bytes) -> None:
    m = matcher(index, {"a.py": "x\n", "./d//e.py": "y\n"})
    assert m.accept_bytes(b'<create path="')
    assert not m.accept_bytes(path + b'">\n'), path


def test_paths_the_resolver_allows_are_accepted(index) -> None:
    m = matcher(index, {"a.py": "x\n"})
    for path in ("a.py/b", ".a", "..a/...", "é ü\u0085/x y", "a" * 4096):
        assert path_problem(path) is None
        data = f'<create path="{path}">\n'.encode()
        assert m.accept_bytes(data), path
        m.rollback(1)
    assert not m.accept_bytes(b'<create path="' + b"a" * 4097)
    assert m.accept_bytes(b'<create path="' + b"a" * 4095)
    assert m.completion_bytes() == b'">\n</create>\n</program>'


def test_path_at_the_length_limit_must_be_one_to_end_on(index) -> None:
    taken = "a" * 4096
    m = matcher(index, {taken: "x\n"})
    assert m.accept_bytes(b'<create path="' + b"a" * 4095)
    assert not m.accept_bytes(b"a")
    mask = m.allowed_tokens()
    assert not mask[m.index.vocabulary.token_bytes.index(b"a")]
    assert m.accept_bytes(b"b")
    assert m.completion_bytes() == b'">\n</create>\n</program>'
    mask = m.allowed_tokens().nonzero().flatten().tolist()
    assert mask and all(m.index.vocabulary.token_bytes[t][:1] == b'"' for t in mask)


def test_forced_literals_run_to_the_end_of_the_line(index) -> None:
    files = {"a.py": "x\n", "b.py": "y\n", "c.py": ""}
    m = matcher(index, files, editable={1}, subline=False)
    assert m.accept_bytes(b"<copy f")
    assert m.forced_bytes() == b'ile="2" lines="1-1"/>\n'
    m = matcher(index, files, editable={1}, subline=True)
    assert m.accept_bytes(b'<copy file="')
    assert m.forced_bytes() == b'2" '
    assert m.accept_bytes(b'2" s')
    assert m.forced_bytes() == b'pan="1:'
    m = matcher(index, files, editable={2})
    assert m.forced_bytes() == b"<"
    assert m.accept_bytes(b"<e")
    assert m.forced_bytes() == b'dit file="2">\n'
    assert m.accept_bytes(b'dit file="2">\n</')
    assert m.forced_bytes() == b"edit>\n"
    assert m.accept_bytes(b"edit>\n")
    assert m.forced_bytes() == b"<"


def test_own_file_names_the_file_plain_copies_take_from(index) -> None:
    m = matcher(index, {"a.py": "x\n", "b.py": "y\n"})
    assert m.own_file == 1
    assert m.accept_bytes(b'<edit file="2">\n')
    assert m.own_file == 2
    assert m.accept_bytes(b"</edit>\n")
    assert m.own_file == 0
    assert m.accept_bytes(b'<create path="n">\n')
    assert m.own_file == 0
    assert isinstance(m, Matcher)


def test_one_file_bare_programs_match_the_single_file_fsm(index) -> None:
    """Built for one file, the multi-file FSM writes a bare program exactly as the
    single-file FSM does: once the first op is open, masks, forced bytes and completions are
    equal token by token (at the start it adds the section openers)."""
    text = "".join(f"line {i} {'x' * (i % 5)}\n" for i in range(40))
    widths = [len(line) for line in text.splitlines(keepends=True)]
    for seed in range(4):
        rng = random.Random(seed)
        single = ProgramMatcher(index, widths, subline=seed % 2 == 1)
        multi = MultiProgramMatcher(index, [widths], subline=seed % 2 == 1)
        start = single.allowed_tokens()
        assert bool((multi.allowed_tokens() | start).eq(multi.allowed_tokens()).all())
        while not single.is_accepting():
            if len(single.text) > 300:
                assert single.accept_bytes(single.completion_bytes())
                assert multi.accept_bytes(multi.completion_bytes())
                break
            mask = single.allowed_tokens()
            pool = (mask & short_tokens(index)).nonzero().flatten()
            if not len(pool):
                pool = mask.nonzero().flatten()
            token = int(pool[rng.randrange(len(pool))])
            assert single.accept_token(token) and multi.accept_token(token)
            if not single.ops:
                continue
            assert torch.equal(single.allowed_tokens(), multi.allowed_tokens()), single.text
            assert single.forced_bytes() == multi.forced_bytes()
            if not single.is_accepting():
                assert single.completion_bytes() == multi.completion_bytes()
        assert multi.is_accepting() and multi.text == single.text


def test_rollback_restores_the_sections_named(index) -> None:
    m = matcher(index, {"a.py": "x\n", "b.py": "y\n"})
    assert m.accept_bytes(b'<edit file="2">\n</edit>\n')
    assert not m.accept_bytes(b'<delete file="2')
    m.rollback(1)
    assert m.accept_bytes(b'<delete file="2"/>\n</program>')
    assert m.program == MultiProgram((DeleteFile(2),))


def test_loaded_index_gives_the_same_multi_file_masks(qwen2_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("CAD_CACHE_DIR", str(tmp_path / "cache"))
    vocabulary = Vocabulary.from_tokenizer(qwen2_tokenizer)
    built = ProgramTokenIndex.for_vocabulary(vocabulary)
    loaded = ProgramTokenIndex.for_vocabulary(vocabulary)
    assert loaded.loaded_from_cache
    files = {"a.py": "x\ny\n", "b.py": "z\n"}
    for prefix in (b"", b'<copy file="2', b'<create path="x', b'<edit file="2">\n'):
        masks = []
        for each in (built, loaded):
            m = MultiProgramMatcher.for_workspace(each, Workspace(files))
            assert m.accept_bytes(prefix) or not prefix
            masks.append(m.allowed_tokens())
        assert torch.equal(*masks)
