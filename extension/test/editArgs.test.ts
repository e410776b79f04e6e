import assert from "node:assert/strict";
import { describe, it } from "vitest";

import {
  buildEditArgument,
  describeResult,
  describeStats,
  editedLines,
  isEditResult,
  selectionRange,
} from "../src/lib/editArgs";

const URI = "file:///tmp/a.py";

describe("buildEditArgument", () => {
  it("sends uri and instruction only, for a whole-file edit", () => {
    assert.deepEqual(buildEditArgument({ uri: URI, instruction: "  rename x  " }), { uri: URI, instruction: "rename x" });
  });
  it("adds range, program and dryRun when given", () => {
    const range = { start: { line: 1, character: 2 }, end: { line: 3, character: 0 } };
    const argument = buildEditArgument({ uri: URI, instruction: "", range, program: "</program>", dryRun: true });
    assert.deepEqual(argument, { uri: URI, instruction: "", range, program: "</program>", dryRun: true });
    assert.notEqual(argument.range, range, "the range is copied");
  });
  it("asks to snap a selection range to its enclosing function or class", () => {
    const range = { start: { line: 4, character: 0 }, end: { line: 5, character: 0 } };
    assert.deepEqual(buildEditArgument({ uri: URI, instruction: "x", range, snap: true }), { uri: URI, instruction: "x", range, snap: true });
  });
  it("sends snap only with a range and without a program", () => {
    const range = { start: { line: 4, character: 0 }, end: { line: 5, character: 0 } };
    assert.equal("snap" in buildEditArgument({ uri: URI, instruction: "x", snap: true }), false);
    assert.equal("snap" in buildEditArgument({ uri: URI, instruction: "", range, program: "</program>", snap: true }), false);
    assert.equal("snap" in buildEditArgument({ uri: URI, instruction: "x", range, snap: false }), false);
  });
  it("leaves dryRun out when false", () => {
    assert.equal("dryRun" in buildEditArgument({ uri: URI, instruction: "x", dryRun: false }), false);
  });
  it("is JSON as the server expects it", () => {
    const text = JSON.stringify(buildEditArgument({ uri: URI, instruction: "x", program: "<gen>a</gen></program>" }));
    assert.equal(text, '{"uri":"file:///tmp/a.py","instruction":"x","program":"<gen>a</gen></program>"}');
  });
});

describe("selectionRange", () => {
  it("takes the cursor's whole line for an empty selection", () => {
    const cursor = { start: { line: 4, character: 7 }, end: { line: 4, character: 7 } };
    assert.deepEqual(selectionRange(cursor), { start: { line: 4, character: 0 }, end: { line: 5, character: 0 } });
    assert.deepEqual(editedLines(selectionRange(cursor)), { first: 4, last: 4 });
  });
  it("orders a backwards selection", () => {
    const backwards = { start: { line: 9, character: 1 }, end: { line: 2, character: 3 } };
    assert.deepEqual(selectionRange(backwards), { start: { line: 2, character: 3 }, end: { line: 9, character: 1 } });
  });
});

describe("editedLines", () => {
  it("leaves out a last line the selection ends at the start of", () => {
    assert.deepEqual(editedLines({ start: { line: 9, character: 0 }, end: { line: 11, character: 0 } }), { first: 9, last: 10 });
  });
  it("keeps the last line when the selection ends inside it", () => {
    assert.deepEqual(editedLines({ start: { line: 9, character: 0 }, end: { line: 11, character: 1 } }), { first: 9, last: 11 });
  });
  it("keeps a one-line range that ends at character 0", () => {
    assert.deepEqual(editedLines({ start: { line: 3, character: 0 }, end: { line: 3, character: 0 } }), { first: 3, last: 3 });
  });
});

describe("results", () => {
  it("recognises an edit result", () => {
    assert.equal(isEditResult({ applied: true, program: "", stats: {} }), true);
    assert.equal(isEditResult({ applied: "yes" }), false);
    assert.equal(isEditResult(null), false);
  });
  it("describes applied edits with their stats", () => {
    const message = describeResult({
      applied: true,
      program: "",
      stats: { ops: 3, lines_copied: 10, lines_generated: 1, wall_s: 1.234 },
    });
    assert.equal(message, "Copy-as-Decode: edit applied (3 ops, 10 lines copied, 1 generated, 1.2 s).");
    assert.equal(describeStats({ ops: 1, mode: "program" }), "1 op");
  });
  it("explains why nothing was applied", () => {
    assert.match(describeResult({ applied: false, program: "", stats: {}, reason: "cancelled" }), /cancelled/);
    assert.match(describeResult({ applied: false, program: "", stats: {}, reason: "superseded" }), /newer edit/);
    assert.match(describeResult({ applied: false, program: "", stats: {}, reason: "document changed" }), /Run the edit again/);
    assert.match(describeResult({ applied: false, program: "", stats: {}, reason: "rejected" }), /\(rejected\)/);
  });
});
