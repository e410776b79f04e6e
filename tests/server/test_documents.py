"""Open documents stay exactly as the editor holds them: incremental ``didChange`` with LF, CR
and CRLF as the only line ends and UTF-16 columns, through LSP frames over stdio."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cad.resolver import parse, resolve
from tests.server.lsp_stdio import RawServer

URI = "file:///tmp/cad-test/doc.py"
NOT_LINE_ENDS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""What ``str.splitlines`` ends lines at and LSP does not."""


def reference_lines(text: str) -> list[str]:
    """Lines as LSP counts them, each with its terminator (LF, CR or CRLF)."""
    lines, start, index = [], 0, 0
    while index < len(text):
        if text[index] in "\r\n":
            end = index + 2 if text[index : index + 2] == "\r\n" else index + 1
            lines.append(text[start:end])
            start = index = end
        else:
            index += 1
    if start < len(text):
        lines.append(text[start:])
    return lines


def units(text: str) -> int:
    """UTF-16 code units of ``text``."""
    return sum(2 if ord(char) > 0xFFFF else 1 for char in text)


def reference_position(text: str, offset: int) -> dict[str, int]:
    """The LSP position of a character offset (which never splits a CRLF)."""
    line_start = 0
    for number, line in enumerate(reference_lines(text)):
        if offset < line_start + len(line) or (
            offset == line_start + len(line) and not line.endswith(("\r", "\n"))
        ):
            return {"line": number, "character": units(text[line_start:offset])}
        line_start += len(line)
    return {"line": len(reference_lines(text)), "character": 0}


def reference_offset(text: str, position: dict[str, int]) -> int:
    """The character offset of an LSP position that lies inside the text."""
    lines = reference_lines(text)
    if position["line"] >= len(lines):
        return len(text)
    start = sum(len(line) for line in lines[: position["line"]])
    count = 0
    for index, char in enumerate(lines[position["line"]]):
        if count == position["character"]:
            return start + index
        count += units(char)
    return start + len(lines[position["line"]].rstrip("\r\n"))


def reference_apply(text: str, edits: list[dict]) -> str:
    """Apply LSP TextEdits (non-overlapping) the way an editor does."""
    spans = sorted(
        (
            (
                reference_offset(text, e["range"]["start"]),
                reference_offset(text, e["range"]["end"]),
                e["newText"],
            )
            for e in edits
        ),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def applied_edits(server: RawServer) -> tuple[int, list[dict]]:
    """The version and the edits of the last ``workspace/applyEdit`` the server sent."""
    (change,) = server.applied[-1]["edit"]["documentChanges"]
    return change["textDocument"]["version"], change["edits"]


def whole(change_range: tuple[int, int, int, int], text: str) -> dict:
    start_line, start_character, end_line, end_character = change_range
    return {
        "range": {
            "start": {"line": start_line, "character": start_character},
            "end": {"line": end_line, "character": end_character},
        },
        "text": text,
    }


SWAP = '<copy lines="2-2"/>\n<copy lines="1-1"/>\n</program>'


def test_an_incremental_change_keeps_unicode_separators_inside_their_line(tmp_path: Path):
    server = RawServer(tmp_path / "log")
    server.initialize()
    server.open(URI, "a\u2028b\nc\n")
    server.change(URI, 2, [whole((1, 0, 1, 0), "X")])
    result = server.edit({"uri": URI, "instruction": "swap", "program": SWAP})["result"]
    code, _ = server.close()
    assert result["applied"] is True and code == 0
    version, edits = applied_edits(server)
    assert version == 2
    assert reference_apply("a\u2028b\nXc\n", edits) == "Xc\na\u2028b\n"


def test_a_document_with_a_lone_surrogate_is_edited_exactly(tmp_path: Path):
    server = RawServer(tmp_path / "log")
    server.initialize()
    server.open(URI, "x = '\ud83d'\ny = 2\n")
    server.change(URI, 2, [whole((0, 6, 0, 6), " # 😀")])
    client = "x = '\ud83d' # 😀\ny = 2\n"
    program = server.edit({"uri": URI, "instruction": "swap", "program": SWAP})
    model = server.edit({"uri": URI, "instruction": "rename x"})
    code, _ = server.close()
    assert program["result"]["applied"] is True and code == 0
    assert reference_apply(client, applied_edits(server)[1]) == "y = 2\nx = '\ud83d' # 😀\n"
    error = model["error"]
    assert error["code"] == -32602 and "data" not in error
    assert "line 1 holds a lone UTF-16 surrogate" in error["message"]
    assert "\n" not in error["message"] and "Traceback" not in server.log()


ALPHABET = ["a", "b", " ", "é", "😀", "\t", "\n", "\r\n", "\r", *NOT_LINE_ENDS]


def random_text(rng: random.Random, most: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, most)))


def random_change(rng: random.Random, text: str) -> tuple[dict, str]:
    """A ``didChange`` content change and the text after it. Ranges start and end at
    character boundaries outside CRLF pairs, as an editor's do; now and then the whole
    text is replaced instead."""
    if rng.random() < 0.05:
        new = random_text(rng, 30)
        return {"text": new}, new
    bounds = [i for i in range(len(text) + 1) if text[i - 1 : i + 1] != "\r\n"]
    start, end = sorted(rng.choice(bounds) for _ in range(2))
    new = random_text(rng, 6)
    change = {
        "range": {"start": reference_position(text, start), "end": reference_position(text, end)},
        "text": new,
    }
    return change, text[:start] + new + text[end:]


def random_program(rng: random.Random, text: str) -> str:
    """A program over ``text``: lines reversed, one line dropped, or a line written."""
    count = len(reference_lines(text))
    if count == 0:
        return "<gen>new\n</gen>\n</program>"
    choice = rng.randrange(3)
    if choice == 0:
        ops = [f'<copy lines="{n}-{n}"/>' for n in range(count, 0, -1)]
    elif choice == 1:
        dropped = rng.randint(1, count)
        ops = [f'<copy lines="{n}-{n}"/>' for n in range(1, count + 1) if n != dropped]
    else:
        at = rng.randint(1, count)
        ops = [f'<copy lines="1-{at}"/>', "<gen>\u2028 😀 é\r\n</gen>"]
        ops += [f'<copy lines="{at + 1}-{count}"/>'] if at < count else []
    return "\n".join([*ops, "</program>"])


def test_random_incremental_changes_then_edits_agree_with_a_reference(tmp_path: Path):
    """Bounded fuzz: documents with every Unicode line break, emoji and CRLF, changed by
    random incremental ``didChange`` sequences, each followed by an edit whose edits are
    applied by an independent reference; every result must be the program's output."""
    rng = random.Random(20)
    server = RawServer(tmp_path / "log")
    server.initialize()
    wrong, checked = [], 0
    for document in range(4):
        uri = f"file:///tmp/cad-test/fuzz{document}.py"
        text = random_text(rng, 80)
        server.open(uri, text)
        for version in range(2, 42):
            changes = []
            for _ in range(rng.randint(1, 3)):
                change, text = random_change(rng, text)
                changes.append(change)
            server.change(uri, version, changes)
            program = random_program(rng, text)
            answer = server.edit(
                {"uri": uri, "instruction": "x", "program": program, "dryRun": True}
            )
            expected = resolve(parse(program), text)
            result = answer.get("result") or {}
            got = reference_apply(text, result.get("edits", [])) if result else None
            checked += 1
            if result.get("version") != version or got != expected:
                wrong.append((document, version, text, program, answer))
    code, _ = server.close()
    assert code == 0
    assert checked == 160 and wrong == []


@pytest.mark.parametrize("separator", list(NOT_LINE_ENDS))
def test_reference_splits_lines_only_at_lf_cr_crlf(separator: str) -> None:
    assert reference_lines(f"a{separator}b\r\nc\rd\ne") == [f"a{separator}b\r\n", "c\r", "d\n", "e"]
