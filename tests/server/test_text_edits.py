"""Minimal LSP edits: exact after application, touching only what changed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

from cad.server.text_edits import apply_text_edits, text_edits

pieces = st.lists(st.sampled_from(["a", "b", "\n", "\r\n", "\r", "é", "😀", "x"]), max_size=30).map(
    "".join
)


@settings(max_examples=500, deadline=None)
@given(old=pieces, new=pieces)
def test_edits_reproduce_the_new_text(old: str, new: str) -> None:
    assert apply_text_edits(old, text_edits(old, new)) == new


def test_edits_touch_only_changed_characters() -> None:
    old = "def f():\r\n    return 1\r\n" + "pass\r\n" * 100
    new = old.replace("return 1", "return 2")
    (edit,) = text_edits(old, new)
    assert edit == lsp.TextEdit(
        range=lsp.Range(
            start=lsp.Position(line=1, character=11), end=lsp.Position(line=1, character=12)
        ),
        new_text="2",
    )


def test_utf16_columns_for_astral_characters() -> None:
    (edit,) = text_edits("😀a\n", "😀b\n")
    assert edit.range.start == lsp.Position(line=0, character=2)


def test_no_change_means_no_edit() -> None:
    assert text_edits("same\n", "same\n") == []
