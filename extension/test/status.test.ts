import assert from "node:assert/strict";
import { describe, it } from "vitest";

import { completeProgram, escapeGen, looksLikeProgram } from "../src/lib/program";
import { parseStatus, type ServerState, statusView } from "../src/lib/status";

describe("parseStatus", () => {
  it("reads the server's notification", () => {
    assert.deepEqual(parseStatus({ state: "loading", message: "Qwen" }), { state: "loading", message: "Qwen" });
    assert.deepEqual(parseStatus({ state: "error", message: "boom" }), { state: "error", message: "boom" });
  });
  it("reads anything unknown as ready", () => {
    assert.deepEqual(parseStatus({ state: "dancing" }), { state: "ready", message: "" });
    assert.deepEqual(parseStatus(undefined), { state: "ready", message: "" });
  });
});

describe("statusView", () => {
  it("spins while loading and editing, and cancels on click", () => {
    for (const state of ["loading", "editing"] as const) {
      const view = statusView(state);
      assert.match(view.text, /~spin/);
      assert.equal(view.command, "cad.cancel");
    }
    assert.match(statusView("loading", "Qwen/X").tooltip, /Qwen\/X/);
  });
  it("shows errors in red with the message", () => {
    const view = statusView("error", "out of memory");
    assert.equal(view.severity, "error");
    assert.match(view.tooltip, /out of memory/);
    assert.equal(view.command, "cad.showOutput");
  });
  it("offers a restart when stopped", () => {
    assert.equal(statusView("stopped").command, "cad.restartServer");
    assert.equal(statusView("stopped").severity, "warning");
  });
  it("has a view for every state", () => {
    const states: ServerState[] = ["starting", "loading", "ready", "editing", "error", "stopped"];
    for (const state of states) {
      assert.equal(statusView(state).state, state);
      assert.match(statusView(state).text, /cad/);
    }
  });
});

describe("program text", () => {
  it("recognises programs", () => {
    assert.equal(looksLikeProgram('<copy lines="1-2"/>'), true);
    assert.equal(looksLikeProgram(' \n<copy span="1:1-1:3"/>'), true);
    assert.equal(looksLikeProgram("<gen>x</gen></program>"), true);
    assert.equal(looksLikeProgram("</program>"), true);
    assert.equal(looksLikeProgram("make it faster"), false);
  });
  it("adds </program> when missing", () => {
    assert.equal(completeProgram('<copy lines="1-1"/>'), '<copy lines="1-1"/>\n</program>');
    assert.equal(completeProgram("<gen>a</gen></program>\n"), "<gen>a</gen></program>\n");
  });
  it("escapes </gen> inside new text", () => {
    assert.equal(escapeGen("a</gen>b<\\/gen>"), "a<\\/gen>b<\\\\/gen>");
  });
});
