"""Hostile values for every option of ``cad edit``, ``cad resolve``, ``cad oracle`` and
``cad analyze``: huge digit strings, deep nesting, large sizes, bytes that are not UTF-8,
special files (``/dev/zero``, ``/dev/full``, a FIFO, a directory). Each run must end with a
non-zero exit status and exactly one ``error:`` line on stderr, never a traceback, within
the subprocess timeout that guards against a hang.

The runs are independent processes, so they are started together, two at a time, by one
module fixture; each case then checks its own outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import TOKENIZERS

CAD = [sys.executable, "-c", "from cad.server.cli import main; main()"]
TIMEOUT_S = 120
HUGE = "9" * 5_000
"""More digits than Python converts to an integer (4,300)."""
NOT_UTF8 = os.fsdecode(b"\xff\xfe")
"""Bytes that are not UTF-8, as Python receives them in argv."""
QWEN = str(TOKENIZERS / "qwen2")


@dataclass(frozen=True)
class Case:
    """One run: the command line, what its one error line must say, and whether its
    standard output is ``/dev/full``."""

    name: str
    args: tuple[str, ...]
    message: str
    full_stdout: bool = False


def edit(name: str, message: str, *args: str, file: str = "mean.py") -> Case:
    """``cad edit`` on a valid file and instruction, plus ``args``; the model never loads
    (no model of that name exists), so each value is refused while it is read."""
    given = set(args)
    base = [] if "--instr" in given else ["--instr", "fix it"]
    base += [] if "--model" in given else ["--model", "no-such-model"]
    if not given & {"--syntax", "--schema", "--grammar", "--baseline"}:
        base += ["--syntax", "none"]  # not a Python file's syntax check: read the options
    return Case(f"edit {name}", ("edit", file, *base, *args), message)


CASES = [
    # cad edit: the file
    edit("file /dev/zero", "/dev/zero: not a regular file", file="/dev/zero"),
    edit("file fifo", "fifo: not a regular file", file="fifo"),
    edit("file folder", "folder: is a directory", file="folder"),
    edit("file binary", "looks like a binary file", file="binary.bin"),
    edit("file latin-1", "not valid UTF-8", file="latin1.txt"),
    edit("file over 4 MB", "over the limit of 4.2 MB", file="big.txt"),
    edit("file name not UTF-8", "no such file", file=NOT_UTF8),
    # --instr
    edit("instr empty", "the instruction is empty", "--instr", " \t"),
    edit("instr not UTF-8", "--instr is not valid UTF-8", "--instr", NOT_UTF8),
    # --model, --device, --dtype, --adapter, --compile
    edit("model /dev/zero", "model folder /dev/zero does not exist", "--model", "/dev/zero"),
    edit("model fifo", "model folder fifo does not exist", "--model", "fifo"),
    edit("model not UTF-8", "cannot load model", "--model", NOT_UTF8),
    edit("model folder", "cannot load model", "--model", "folder", "--compile"),
    edit("device", "unknown device", "--model", str(TOKENIZERS), "--device", "cuda:" + HUGE),
    edit("dtype", "unknown dtype", "--model", str(TOKENIZERS), "--dtype", NOT_UTF8),
    edit("adapter /dev/zero", "adapter /dev/zero: cannot read", "--adapter", "/dev/zero"),
    edit("adapter folder", "has no adapter_config.json", "--adapter", "folder"),
    # --program
    edit("program /dev/zero", "/dev/zero: not a regular file", "--program", "/dev/zero"),
    edit("program fifo", "fifo: not a regular file", "--program", "fifo"),
    edit("program huge number", "at most 18 digits", "--program", "huge.program"),
    edit(
        "program copies too much",
        "the most a program may write",
        "--program",
        "many.program",
        file="line.txt",
    ),
    # --baseline, --target, --write / --stdout / --diff, --stats-json
    edit("baseline", "Invalid value for '--baseline'", "--baseline", HUGE),
    edit("target fifo", "fifo: not a regular file", "--baseline", "ar", "--target", "fifo"),
    edit(
        "write and stdout",
        "choose one of --write, --stdout, --diff and --json",
        "--write",
        "--stdout",
    ),
    edit("stats /dev/full", "/dev/full: not a regular file", "--stats-json", "/dev/full"),
    edit("stats folder", "folder: not a regular file", "--stats-json", "folder"),
    # --grammar, --grammar-format, --ignore-unsupported
    edit("grammar fifo", "fifo: not a regular file", "--grammar", "fifo"),
    edit("grammar count", "more than 18 digits", "--grammar", "enormous.ebnf"),
    edit("grammar expansion", "expands to more than", "--grammar", "expanding.ebnf"),
    edit("grammar groups", "groups nested more than 64 deep", "--grammar", "groups.ebnf"),
    edit("grammar postfix", "nests more than 256 levels", "--grammar", "postfix.ebnf"),
    edit(
        "grammar schema number",
        "a number of about 5,000 digits",
        "--grammar",
        "huge-number.json",
        "--grammar-format",
        "json-schema",
    ),
    edit(
        "grammar schema depth",
        "nests more than 64 levels deep",
        "--grammar",
        "deep-schema.json",
        "--grammar-format",
        "json-schema",
    ),
    edit(
        "grammar schema NaN",
        "NaN is not a JSON number",
        "--grammar",
        "nan.json",
        "--grammar-format",
        "json-schema",
    ),
    edit(
        "grammar schema counts",
        "'minItems' cannot be enforced",
        "--grammar",
        "counts.json",
        "--grammar-format",
        "json-schema",
    ),
    edit("grammar format", "Invalid value for '--grammar-format'", "--grammar-format", HUGE),
    edit(
        "ignore-unsupported",
        "applies to --grammar-format json-schema",
        "--grammar",
        "enormous.ebnf",
        "--ignore-unsupported",
    ),
    # decoding options
    edit("max-new-tokens", "Invalid value for '--max-new-tokens'", "--max-new-tokens", HUGE),
    edit("max-new-tokens zero", "Invalid value for '--max-new-tokens'", "--max-new-tokens", "0"),
    edit("temperature", "Invalid value for '--temperature'", "--temperature", "nan"),
    edit("top-p", "Invalid value for '--top-p'", "--top-p", "-" + HUGE),
    edit("seed", "Invalid value for '--seed'", "--seed", HUGE),
    edit("seed past 64 bits", "Invalid value for '--seed'", "--seed", str(2**64)),
    edit(
        "subline in rewrite mode",
        "--subline applies to program mode",
        "--mode",
        "rewrite",
        "--subline",
    ),
    # rewrite mode: --mode, --lines, --draft-config, --draft-budget
    edit("mode", "Invalid value for '--mode'", "--mode", NOT_UTF8),
    edit("lines huge", "expected I-J in digits", "--mode", "rewrite", "--lines", f"1-{HUGE}"),
    edit("lines superscript", "expected I-J in digits", "--mode", "rewrite", "--lines", "\u00b2"),
    edit(
        "lines other digits", "expected I-J in digits", "--mode", "rewrite", "--lines", "1-\u0663"
    ),
    edit("lines not UTF-8", "expected I-J in digits", "--mode", "rewrite", "--lines", NOT_UTF8),
    edit("lines zero", "lines count from 1", "--mode", "rewrite", "--lines", "0-1"),
    edit(
        "draft-config /dev/zero",
        "/dev/zero: not a regular file",
        "--mode",
        "rewrite",
        "--draft-config",
        "/dev/zero",
    ),
    edit(
        "draft-config fifo",
        "fifo: not a regular file",
        "--mode",
        "rewrite",
        "--draft-config",
        "fifo",
    ),
    edit(
        "draft-config deep",
        "nested too deeply",
        "--mode",
        "rewrite",
        "--draft-config",
        "nested.json",
    ),
    edit(
        "draft-config huge number",
        "numbers too long",
        "--mode",
        "rewrite",
        "--draft-config",
        "huge-budget.json",
    ),
    edit(
        "draft-budget",
        "Invalid value for '--draft-budget'",
        "--mode",
        "rewrite",
        "--draft-budget",
        "-1",
    ),
    # --syntax, --schema
    edit("syntax", "Invalid value for '--syntax'", "--syntax", HUGE),
    edit(
        "syntax deep JSON", "nests JSON 100,000 levels deep", "--syntax", "json", file="deep.json"
    ),
    edit("schema /dev/zero", "/dev/zero: not a regular file", "--schema", "/dev/zero"),
    edit("schema fifo", "fifo: not a regular file", "--schema", "fifo"),
    edit("schema number", "a number of about 5,000 digits", "--schema", "huge-number.json"),
    edit("schema NaN", "NaN is not a JSON number", "--schema", "nan.json"),
    edit("schema depth", "nests more than 64 levels deep", "--schema", "deep-schema.json"),
    # cad resolve
    Case("resolve program /dev/zero", ("resolve", "/dev/zero", "doc.txt"), "not a regular file"),
    Case("resolve program fifo", ("resolve", "fifo", "doc.txt"), "fifo: not a regular file"),
    Case("resolve program folder", ("resolve", "folder", "doc.txt"), "is a directory"),
    Case("resolve program over 4 MB", ("resolve", "big.txt", "doc.txt"), "over the limit"),
    Case("resolve huge number", ("resolve", "huge.program", "doc.txt"), "at most 18 digits"),
    Case(
        "resolve output past the limit",
        ("resolve", "many.program", "line.txt"),
        "op 17: the output would pass 16,777,216 characters",
    ),
    Case("resolve document /dev/zero", ("resolve", "ok.program", "/dev/zero"), "not a regular"),
    Case("resolve document latin-1", ("resolve", "ok.program", "latin1.txt"), "not valid UTF-8"),
    Case(
        "resolve to /dev/full",
        ("resolve", "ok.program", "doc.txt"),
        "cannot write the output to stdout (No space left on device)",
        full_stdout=True,
    ),
    # cad oracle
    Case("oracle before /dev/zero", ("oracle", "/dev/zero", "doc.txt"), "not a regular file"),
    Case("oracle after fifo", ("oracle", "doc.txt", "fifo"), "fifo: not a regular file"),
    Case("oracle folder", ("oracle", "folder", "doc.txt"), "both be files or both be folders"),
    Case("oracle over 4 MB", ("oracle", "doc.txt", "big.txt", "--subline"), "over the limit"),
    Case(
        "oracle min-copy huge",
        ("oracle", "doc.txt", "doc.txt", "--min-copy", HUGE),
        "Invalid value for '--min-copy'",
    ),
    Case(
        "oracle min-copy zero",
        ("oracle", "doc.txt", "doc.txt", "--min-copy", "0"),
        "Invalid value for '--min-copy'",
    ),
    Case(
        "oracle to /dev/full",
        ("oracle", "doc.txt", "mean.py", "--subline"),
        "cannot write the output to stdout",
        full_stdout=True,
    ),
    # cad analyze
    Case(
        "analyze corpus /dev/zero",
        ("analyze", "/dev/zero", "--tokenizer", QWEN),
        "not a regular file",
    ),
    Case("analyze corpus fifo", ("analyze", "fifo", "--tokenizer", QWEN), "not a regular"),
    Case("analyze corpus folder", ("analyze", "folder", "--tokenizer", QWEN), "is a directory"),
    Case(
        "analyze corpus deep row",
        ("analyze", "deep-row.jsonl", "--tokenizer", QWEN),
        "deep-row.jsonl:1: not an edit (JSON nested too deeply",
    ),
    Case(
        "analyze corpus number row",
        ("analyze", "number-row.jsonl", "--tokenizer", QWEN),
        "number-row.jsonl:2: not an edit",
    ),
    Case(
        "analyze corpus large row",
        ("analyze", "large-row.jsonl", "--tokenizer", QWEN),
        "large-row.jsonl:1: 'before' has 4,200,000 characters, over the limit",
    ),
    Case(
        "analyze corpus name not UTF-8", ("analyze", NOT_UTF8, "--tokenizer", QWEN), "no such file"
    ),
    Case(
        "analyze tokenizer /dev/zero",
        ("analyze", "edits.jsonl", "--tokenizer", "/dev/zero"),
        "no tokenizer.json there",
    ),
    Case(
        "analyze tokenizer garbage",
        ("analyze", "edits.jsonl", "--tokenizer", "garbage"),
        "not a tokenizer file",
    ),
    Case(
        "analyze tokenizer fifo",
        ("analyze", "edits.jsonl", "--tokenizer", "piped"),
        "no tokenizer.json there",
    ),
    Case(
        "analyze min-copy",
        ("analyze", "edits.jsonl", "--tokenizer", QWEN, "--min-copy", HUGE),
        "Invalid value for '--min-copy'",
    ),
    Case(
        "analyze kernel-speedup",
        ("analyze", "edits.jsonl", "--tokenizer", QWEN, "--kernel-speedup", "nan"),
        "Invalid value for '--kernel-speedup'",
    ),
    Case(
        "analyze kernel-speedup huge",
        ("analyze", "same.jsonl", "--tokenizer", QWEN, "--kernel-speedup", HUGE),
        "Invalid value for '--kernel-speedup'",
    ),
    Case(
        "analyze to /dev/full",
        ("analyze", "edits.jsonl", "--tokenizer", QWEN, "--json"),
        "cannot write the output to stdout",
        full_stdout=True,
    ),
]


def hostile_files(folder: Path) -> None:
    """Every file the cases name, of every shape and size."""
    (folder / "mean.py").write_text("def mean(values):\n    return sum(values) / len(values)\n")
    (folder / "doc.txt").write_text("one\ntwo\nthree\n")
    (folder / "ok.program").write_text('<copy lines="1-2"/>\n</program>')
    (folder / "huge.program").write_text(f'<copy lines="1-{HUGE}"/>\n</program>')
    (folder / "line.txt").write_text("x" * (1024 * 1024 - 1) + "\n")
    (folder / "many.program").write_text('<copy lines="1-1"/>\n' * 190_000 + "</program>")
    (folder / "binary.bin").write_bytes(b"\x00\x01\x02")
    (folder / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (folder / "big.txt").write_text("x" * (4 * 1024 * 1024 + 1))
    (folder / "folder").mkdir()
    os.mkfifo(folder / "fifo")
    (folder / "deep.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    (folder / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "huge-number.json").write_text('{"type": "integer", "minimum": ' + HUGE + "}")
    (folder / "huge-budget.json").write_text('{"budget": ' + HUGE + "}")
    (folder / "nan.json").write_text('{"type": "number", "maximum": NaN}')
    (folder / "deep-schema.json").write_text('{"items":' * 100_000 + "{}" + "}" * 100_000)
    (folder / "counts.json").write_text('{"type": "array", "minItems": 1000000000}')
    (folder / "enormous.ebnf").write_text('root ::= "a"{1000000000000000000000000000000}')
    (folder / "expanding.ebnf").write_text('root ::= (("a"{1000}){1000}){1000}')
    (folder / "groups.ebnf").write_text("root ::= " + "(" * 400 + '"a"' + ")" * 400)
    (folder / "postfix.ebnf").write_text('root ::= "a"' + "?" * 5_000)
    edit_row = json.dumps({"before": "a = 1\n", "after": "a = 2\n"})
    (folder / "edits.jsonl").write_text(edit_row + "\n")
    (folder / "same.jsonl").write_text(json.dumps({"before": "a\n", "after": "a\n"}) + "\n")
    (folder / "deep-row.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    (folder / "number-row.jsonl").write_text(edit_row + '\n{"before": ' + HUGE + "}\n")
    large = json.dumps({"before": "x" * 4_200_000, "after": "y"})
    (folder / "large-row.jsonl").write_text(large + "\n")
    (folder / "garbage").mkdir()
    (folder / "garbage" / "tokenizer.json").write_text('{"model": [[[["not a tokenizer')
    (folder / "piped").mkdir()
    os.mkfifo(folder / "piped" / "tokenizer.json")


def run(case: Case, folder: Path) -> subprocess.CompletedProcess[bytes]:
    """One case in its own process; stdout to ``/dev/full`` when the case says so."""
    with open("/dev/full" if case.full_stdout else os.devnull, "wb") as stdout:
        return subprocess.run(
            [*CAD, *case.args],
            stdout=stdout,
            stderr=subprocess.PIPE,
            cwd=folder,
            timeout=TIMEOUT_S,
        )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, subprocess.CompletedProcess[bytes] | str]:
    """Every case's finished process (or the timeout it hit), run two at a time."""
    folder = tmp_path_factory.mktemp("hostile")
    hostile_files(folder)

    def outcome(case: Case) -> subprocess.CompletedProcess[bytes] | str:
        try:
            return run(case, folder)
        except subprocess.TimeoutExpired:
            return f"no answer within {TIMEOUT_S} s"

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([c.name for c in CASES], pool.map(outcome, CASES), strict=True))


def test_case_names_are_unique() -> None:
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input_is_one_error_line(case: Case, outcomes) -> None:
    result = outcomes[case.name]
    assert not isinstance(result, str), result
    stderr = result.stderr.decode("utf-8", errors="replace")
    assert result.returncode != 0, stderr
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert case.message in lines[0], lines[0]
