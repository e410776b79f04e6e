import assert from "node:assert/strict";
import { describe, it } from "vitest";

import { applyTextEdits, lineStarts, offsetAt, positionAt, type TextEdit } from "../src/lib/textEdits";

function edit(line: number, character: number, endLine: number, endCharacter: number, newText: string): TextEdit {
  return { range: { start: { line, character }, end: { line: endLine, character: endCharacter } }, newText };
}

describe("lineStarts", () => {
  it("ends lines at LF, CRLF and CR", () => {
    assert.deepEqual(lineStarts("a\nb\r\nc\rd"), [0, 2, 5, 7]);
  });
  it("opens a last empty line after a final terminator", () => {
    assert.deepEqual(lineStarts("a\r\n"), [0, 3]);
    assert.deepEqual(lineStarts(""), [0]);
  });
});

describe("offsetAt", () => {
  const text = "ab\r\ncd\n";
  it("counts lines and characters", () => {
    assert.equal(offsetAt(text, { line: 1, character: 1 }), 5);
  });
  it("clamps a character past the line end to before the terminator", () => {
    assert.equal(offsetAt(text, { line: 0, character: 99 }), 2);
  });
  it("maps a line past the end to the end of the text", () => {
    assert.equal(offsetAt(text, { line: 9, character: 0 }), text.length);
  });
  it("counts UTF-16 code units (an emoji is two)", () => {
    const emoji = "# 😀 done\n";
    assert.equal(offsetAt(emoji, { line: 0, character: 4 }), 4);
    assert.equal(emoji.slice(4), " done\n");
  });
  it("is the inverse of positionAt", () => {
    const mixed = "x\r\ny😀\rz\n\n";
    for (let offset = 0; offset <= mixed.length; offset++) {
      if (mixed[offset - 1] === "\r" && mixed[offset] === "\n") {
        continue; // between CR and LF there is no position
      }
      assert.equal(offsetAt(mixed, positionAt(mixed, offset)), offset);
    }
  });
});

describe("applyTextEdits", () => {
  it("applies edits given in any order", () => {
    const before = "one\ntwo\nthree\n";
    const after = applyTextEdits(before, [edit(2, 0, 2, 5, "3"), edit(0, 0, 0, 3, "1")]);
    assert.equal(after, "1\ntwo\n3\n");
  });
  it("deletes whole lines and keeps CRLF endings", () => {
    const before = "a\r\nb\r\nc\r\n";
    assert.equal(applyTextEdits(before, [edit(1, 0, 2, 0, "")]), "a\r\nc\r\n");
  });
  it("keeps the array order of inserts at one position", () => {
    assert.equal(applyTextEdits("x", [edit(0, 0, 0, 0, "a"), edit(0, 0, 0, 0, "b")]), "abx");
  });
  it("appends after a last line without terminator", () => {
    assert.equal(applyTextEdits("a", [edit(0, 1, 0, 1, "\nb")]), "a\nb");
    assert.equal(applyTextEdits("a\n", [edit(1, 0, 1, 0, "b\n")]), "a\nb\n");
  });
  it("edits after a surrogate pair", () => {
    assert.equal(applyTextEdits("# 😀 done\n", [edit(0, 4, 0, 4, " all")]), "# 😀 all done\n");
  });
  it("refuses overlapping edits", () => {
    assert.throws(() => applyTextEdits("abcdef", [edit(0, 0, 0, 3, "x"), edit(0, 2, 0, 4, "y")]), /overlaps/);
  });
  it("returns the text unchanged without edits", () => {
    assert.equal(applyTextEdits("same\r", []), "same\r");
  });
});
