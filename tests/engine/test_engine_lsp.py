"""End to end: a pygls client drives ``cad serve --engine URL``, which edits through the real
engine; the editor receives ``workspace/applyEdit`` with exactly the text the in-process
server produces from the same model."""

from __future__ import annotations

import pytest

from tests.server.test_serve import URI, Client, reported, run, text_after

pytestmark = pytest.mark.engine
DOCUMENT = "def f(x):\n    fix me\n    return x\n"
LINE_2 = {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}}


async def edit_with(options: dict, args: tuple[str, ...], argument: dict) -> tuple[Client, dict]:
    client = Client()
    await client.start(options, args=args)
    client.open(DOCUMENT, version=4)
    result = await client.try_edit({"uri": URI, **argument})
    await client.stop()
    return client, result


def test_rewrite_through_the_engine_equals_in_process(engine) -> None:
    argument = {"instruction": "simplify", "range": LINE_2}
    remote, through_engine = run(edit_with({"mode": "rewrite"}, ("--engine", engine.url), argument))
    assert through_engine["applied"] is True, through_engine
    assert through_engine["stats"]["mode"] == "rewrite"
    assert text_after(remote, DOCUMENT) == "def f(x):\nreturn None\n    return x\n"
    assert reported(remote)
    (params,) = remote.applied
    assert params.edit.document_changes[0].text_document.version == 4
    # the engine decodes without the syntax constraint, so the local run does too
    local_options = {
        "mode": "rewrite",
        "model": str(engine.model),
        "device": "cpu",
        "dtype": "float32",
        "syntax": "none",
    }
    local, in_process = run(edit_with(local_options, (), argument))
    assert in_process["applied"] is True
    assert text_after(local, DOCUMENT) == text_after(remote, DOCUMENT)


def test_engine_refusals_reach_the_editor_as_one_line(engine) -> None:
    spent = run(
        edit_with(
            {"mode": "program", "maxNewTokens": 12},
            ("--engine", engine.url),
            {"instruction": "simplify"},
        )
    )[1]
    assert spent["error"].startswith("the model used its whole budget of 12 tokens")
    other = run(
        edit_with(
            {"mode": "rewrite", "model": "someone/else"},
            ("--engine", engine.url),
            {"instruction": "simplify"},
        )
    )[1]
    assert "serves another model than cad.model 'someone/else'" in other["error"]
    for message in (spent["error"], other["error"]):
        assert "\n" not in message
