import assert from "node:assert/strict";
import { describe, it } from "vitest";

import { HISTORY_KEY, historyChoices, InstructionHistory, type KeyValueStore, pushHistory } from "../src/lib/history";

class MemoryStore implements KeyValueStore {
  readonly values = new Map<string, unknown>();
  get<T>(key: string): T | undefined {
    return this.values.get(key) as T | undefined;
  }
  update(key: string, value: unknown): Promise<void> {
    this.values.set(key, value);
    return Promise.resolve();
  }
}

describe("pushHistory", () => {
  it("puts the newest first without duplicates", () => {
    assert.deepEqual(pushHistory(["a", "b", "c"], " b "), ["b", "a", "c"]);
  });
  it("keeps at most the limit", () => {
    assert.deepEqual(pushHistory(["a", "b", "c"], "d", 3), ["d", "a", "b"]);
  });
  it("ignores blank entries", () => {
    assert.deepEqual(pushHistory(["a", " "], "  "), ["a"]);
  });
});

describe("historyChoices", () => {
  it("offers what was typed first, then the history", () => {
    assert.deepEqual(historyChoices("new", ["old"]), [{ label: "new" }, { label: "old", description: "recent" }]);
  });
  it("does not repeat a history entry", () => {
    assert.deepEqual(historyChoices("old", ["old"]), [{ label: "old", description: "recent" }]);
    assert.deepEqual(historyChoices("", ["old"]), [{ label: "old", description: "recent" }]);
  });
});

describe("InstructionHistory", () => {
  it("persists through the store", async () => {
    const store = new MemoryStore();
    const history = new InstructionHistory(store, 2);
    await history.add("one");
    await history.add("two");
    await history.add("three");
    assert.deepEqual(history.entries(), ["three", "two"]);
    assert.deepEqual(new InstructionHistory(store).entries(), ["three", "two"]);
    await history.clear();
    assert.deepEqual(history.entries(), []);
  });
  it("drops malformed stored values", () => {
    const store = new MemoryStore();
    store.values.set(HISTORY_KEY, ["ok", 3, null]);
    assert.deepEqual(new InstructionHistory(store).entries(), ["ok"]);
    store.values.set(HISTORY_KEY, "not a list");
    assert.deepEqual(new InstructionHistory(store).entries(), []);
  });
});
