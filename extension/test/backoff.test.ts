import assert from "node:assert/strict";
import { describe, it } from "vitest";

import { type BackoffOptions, DEFAULT_BACKOFF, RestartPolicy } from "../src/lib/backoff";

/** The delays of back-to-back exits until the policy gives up. */
function schedule(options: BackoffOptions): number[] {
  const policy = new RestartPolicy(options);
  const delays: number[] = [];
  for (let now = 0; ; now++) {
    const decision = policy.exited(now);
    if (!decision.restart) {
      return delays;
    }
    delays.push(decision.delayMs);
  }
}

describe("back-off schedule", () => {
  it("doubles from one second, five times", () => {
    assert.deepEqual(schedule(DEFAULT_BACKOFF), [1000, 2000, 4000, 8000, 16000]);
  });
  it("is capped", () => {
    assert.deepEqual(schedule({ ...DEFAULT_BACKOFF, maxRestarts: 4, initialDelayMs: 10000, maxDelayMs: 25000 }), [
      10000, 20000, 25000, 25000,
    ]);
  });
});

describe("RestartPolicy", () => {
  it("restarts a bounded number of times, then gives up", () => {
    const policy = new RestartPolicy();
    const delays: number[] = [];
    let now = 0;
    for (;;) {
      policy.started(now);
      now += 10;
      const decision = policy.exited(now);
      if (!decision.restart) {
        assert.equal(decision.attempts, DEFAULT_BACKOFF.maxRestarts);
        break;
      }
      delays.push(decision.delayMs);
      now += decision.delayMs;
    }
    assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000]);
  });
  it("counts failed starts (no started()) as crashes too", () => {
    const policy = new RestartPolicy({ ...DEFAULT_BACKOFF, maxRestarts: 2 });
    assert.equal(policy.exited(0).restart, true);
    assert.equal(policy.exited(1).restart, true);
    assert.equal(policy.exited(2).restart, false);
  });
  it("starts over after the server stayed up long enough", () => {
    const policy = new RestartPolicy({ ...DEFAULT_BACKOFF, maxRestarts: 2 });
    policy.exited(0);
    policy.exited(1);
    policy.started(2);
    const decision = policy.exited(2 + DEFAULT_BACKOFF.resetAfterMs);
    assert.deepEqual(decision, { restart: true, delayMs: 1000, attempt: 1 });
  });
  it("starts over when reset", () => {
    const policy = new RestartPolicy({ ...DEFAULT_BACKOFF, maxRestarts: 1 });
    policy.exited(0);
    assert.equal(policy.exited(1).restart, false);
    policy.reset();
    assert.equal(policy.exited(2).restart, true);
  });
});
