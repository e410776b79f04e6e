import { describe, expect, it } from "vitest";

import { ProgressRouter } from "../src/lib/progress";

describe("ProgressRouter", () => {
  it("gives each begun token to the oldest edit still waiting, with its messages", () => {
    const router = new ProgressRouter();
    const first: string[] = [];
    const second: string[] = [];
    const a = router.open((message) => first.push(message));
    const b = router.open((message) => second.push(message));
    expect(router.begin("t1", "loading")).toBe(true);
    expect(router.begin("t2")).toBe(true);
    expect(router.report("t2", "3 ops")).toBe(true);
    expect(router.report("t1", "1 op")).toBe(true);
    expect([a.token, b.token]).toEqual(["t1", "t2"]);
    expect(first).toEqual(["loading", "1 op"]);
    expect(second).toEqual(["3 ops"]);
  });

  it("skips edits that finished without progress (rejected by the server)", () => {
    const router = new ProgressRouter();
    const rejected = router.open(() => undefined);
    const next = router.open(() => undefined);
    rejected.close();
    router.begin(7);
    expect(rejected.token).toBeUndefined();
    expect(next.token).toBe(7);
  });

  it("forgets the token at its end and when the edit closes", () => {
    const router = new ProgressRouter();
    const edit = router.open(() => undefined);
    router.begin("t");
    expect(router.end("t")).toBe(true);
    expect(edit.token).toBeUndefined();
    expect(router.report("t", "late")).toBe(false);

    const other = router.open(() => undefined);
    router.begin("u");
    other.close();
    expect(other.token).toBeUndefined();
    expect(router.report("u", "late")).toBe(false);
    expect(router.end("u")).toBe(false);
  });

  it("leaves progress that no edit waits for to someone else", () => {
    const router = new ProgressRouter();
    expect(router.begin("other")).toBe(false);
    expect(router.report("other", "x")).toBe(false);
    expect(router.end("other")).toBe(false);
  });
});
