"""Python's layout between the lexer and the parser: NEWLINE, INDENT and DEDENT.

The rules of the tokenizer (language reference, 2.1 and 2.2): a logical line ends at a
newline outside brackets; lines holding only whitespace and comments are ignored; at the
first token of a logical line its column is compared with the stack of indentation levels
(a tab moves to the next multiple of 8; the same line must compare the same way with tabs
counted as one column, or the indentation is inconsistent); a form feed resets the column;
a backslash at the end of a line joins it with the next, and whitespace before a first
such backslash sets the column of the line it continues. At the end of the input the open
logical line gets its NEWLINE, every level a DEDENT, then ENDMARKER.

A layout state is ``(depth, indents, at_line_start, col, altcol, cont_col, after_cont)``;
paired with a parser configuration it is interned as one int, and ``step`` is memoised.
"""

from __future__ import annotations

from cad.grammar.syntax.glr import DEAD, GlrParser
from cad.grammar.syntax.python_lexer import LAYOUT_LEXEMES, TokenGroups

MAX_DEPTH = 200
"""Brackets nested deeper are an error (CPython's tokenizer limit)."""
MAX_INDENT = 100
"""More indentation levels are an error (CPython's tokenizer limit)."""
TAB_SIZE = 8

Layout = tuple[int, tuple[tuple[int, int], ...], bool, int, int, int, bool]
_START: Layout = (0, ((0, 0),), True, 0, 0, 0, False)


class LayoutParser:
    """Layout states paired with GLR configurations, stepped by lexer events."""

    def __init__(self, groups: TokenGroups, parser: GlrParser) -> None:
        self.groups = groups
        self.parser = parser
        tokens = groups.token_ids
        self.newline = tokens["NEWLINE"]
        self.indent = tokens["INDENT"]
        self.dedent = tokens["DEDENT"]
        self.endmarker = tokens["ENDMARKER"]
        self.states: list[tuple[Layout, int]] = []
        self._ids: dict[tuple[Layout, int], int] = {}
        self._steps: dict[tuple[int, int], int] = {}
        self._complete: dict[int, bool] = {}
        base = groups.layout_base
        self._sp, self._tab, self._ff, self._nl, self._comment, self._cont = (
            base + i for i in range(len(LAYOUT_LEXEMES))
        )
        self.initial = self._id(_START, parser.initial)

    def entries(self) -> int:
        """How much is held: interned layout states and memo rows."""
        return len(self.states) + len(self._steps) + len(self._complete)

    def _id(self, layout: Layout, config: int) -> int:
        key = (layout, config)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.states)
            self.states.append(key)
        return found

    def step(self, state: int, event: int) -> int:
        """The state after ``event`` (a lexer event), or :data:`DEAD`."""
        key = (state, event)
        found = self._steps.get(key)
        if found is None:
            found = self._steps[key] = self._step(state, event)
        return found

    def is_complete(self, state: int) -> bool:
        """Whether the input may end here: the open line closed, every level dedented,
        ENDMARKER read and the sentence complete."""
        found = self._complete.get(state)
        if found is None:
            found = self._complete[state] = self._at_end(state)
        return found

    def _at_end(self, state: int) -> bool:
        layout, config = self.states[state]
        depth, indents, at_start, _, _, _, after_cont = layout
        if depth or after_cont:
            return False
        parser = self.parser
        if not at_start:
            config = parser.step(config, self.newline)
        for _ in range(len(indents) - 1):
            if config == DEAD:
                return False
            config = parser.step(config, self.dedent)
        if config == DEAD:
            return False
        config = parser.step(config, self.endmarker)
        return config != DEAD and parser.accepts_end(config)

    def _step(self, state: int, event: int) -> int:
        layout, config = self.states[state]
        depth, indents, at_start, col, altcol, cont_col, _ = layout
        groups = self.groups
        parser = self.parser
        if event >= groups.run_base:
            if not at_start:
                return state
            kind, count = groups.run_of(event)  # type: ignore[misc]
            if kind == "SP":
                col, altcol = col + count, altcol + count
            else:
                col, altcol = (col // TAB_SIZE + count) * TAB_SIZE, altcol + count
            return self._id((depth, indents, True, col, altcol, cont_col, False), config)
        if event >= groups.layout_base:
            if event == self._cont:
                if at_start and not cont_col:
                    cont_col = col
                return self._id((depth, indents, at_start, col, altcol, cont_col, True), config)
            if not at_start:
                if event == self._nl and depth == 0:
                    config = parser.step(config, self.newline)
                    if config == DEAD:
                        return DEAD
                    return self._id((0, indents, True, 0, 0, 0, False), config)
                if (
                    event == self._comment
                    and depth == 0
                    and parser.step(config, self.newline) == DEAD
                ):
                    return DEAD
                return self._id((depth, indents, False, 0, 0, 0, False), config)
            if event == self._sp:
                col, altcol = col + 1, altcol + 1
            elif event == self._tab:
                col, altcol = (col // TAB_SIZE + 1) * TAB_SIZE, altcol + 1
            elif event == self._ff:
                col = altcol = 0
            elif event == self._nl:
                col = altcol = cont_col = 0
            return self._id((depth, indents, True, col, altcol, cont_col, False), config)
        inner = event >= groups.count
        group = event - groups.count if inner else event
        if at_start:
            if cont_col:
                col = altcol = cont_col
            resolved = self._indentation(indents, col, altcol, config)
            if resolved is None:
                return DEAD
            indents, config = resolved
        if not inner:
            if group in groups.openers:
                depth += 1
                if depth > MAX_DEPTH:
                    return DEAD
            elif group in groups.closers:
                if depth == 0:
                    return DEAD
                depth -= 1
        config = parser.step_any(config, groups.groups[group])
        if config == DEAD:
            return DEAD
        return self._id((depth, indents, False, 0, 0, 0, False), config)

    def _indentation(
        self, indents: tuple[tuple[int, int], ...], col: int, altcol: int, config: int
    ) -> tuple[tuple[tuple[int, int], ...], int] | None:
        """INDENT or DEDENTs before the first token of a logical line at ``col``."""
        parser = self.parser
        top_col, top_alt = indents[-1]
        if col == top_col:
            return (indents, config) if altcol == top_alt else None
        if col > top_col:
            if altcol <= top_alt or len(indents) > MAX_INDENT:
                return None
            config = parser.step(config, self.indent)
            return None if config == DEAD else ((*indents, (col, altcol)), config)
        while col < indents[-1][0]:
            indents = indents[:-1]
            config = parser.step(config, self.dedent)
            if config == DEAD:
                return None
        if indents[-1] != (col, altcol):
            return None
        return indents, config
