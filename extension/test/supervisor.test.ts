import { describe, expect, it } from "vitest";

import { type BackoffOptions, DEFAULT_BACKOFF } from "../src/lib/backoff";
import { Supervisor } from "../src/lib/supervisor";

/** A server handle: which launch made it. */
interface FakeServer {
  id: number;
}

/** Launch failures the test scripts: a thrown error and whether retrying can help. */
class LaunchError extends Error {
  constructor(readonly retryable: boolean) {
    super(retryable ? "exited during initialize" : "cad was not found");
  }
}

/** A pending `sleep` the test resolves by hand. */
interface Nap {
  ms: number;
  wake(): void;
}

/**
 * Supervisor hooks that record everything, with a clock and sleeps the test drives: nothing
 * waits on real time.
 */
class Harness {
  readonly launches: FakeServer[] = [];
  readonly stopped: number[] = [];
  readonly states: string[] = [];
  readonly gaveUp: string[] = [];
  readonly failed: unknown[] = [];
  readonly naps: Nap[] = [];
  /** Errors the next launches throw, in order; then launches succeed. */
  readonly failures: LaunchError[] = [];
  clock = 0;
  private readonly waiters: { ready: () => boolean; resolve: () => void }[] = [];
  /** Launches resolve when the test releases them (concurrency tests), else at once. */
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;

  readonly supervisor: Supervisor<FakeServer>;

  constructor(options: BackoffOptions = DEFAULT_BACKOFF) {
    this.supervisor = new Supervisor<FakeServer>(
      {
        launch: async () => {
          await this.gate;
          const failure = this.failures.shift();
          if (failure !== undefined) {
            this.notify();
            throw failure;
          }
          const server = { id: this.launches.length + 1 };
          this.launches.push(server);
          this.notify();
          return server;
        },
        stop: (server) => {
          this.stopped.push(server.id);
          return Promise.resolve();
        },
        retryable: (error) => error instanceof LaunchError && error.retryable,
        state: (state, message) => {
          this.states.push(message ? `${state}: ${message}` : state);
          this.notify();
        },
        gaveUp: (message) => {
          this.gaveUp.push(message);
          this.notify();
        },
        failed: (error) => {
          this.failed.push(error);
          this.notify();
        },
        log: () => undefined,
        now: () => this.clock,
        sleep: (ms) =>
          new Promise<void>((resolve) => {
            this.naps.push({ ms, wake: resolve });
            this.notify();
          }),
      },
      options,
    );
  }

  /** Hold launches until {@link release}. */
  hold(): void {
    this.gate = new Promise((resolve) => {
      this.open = resolve;
    });
  }

  release(): void {
    this.open?.();
    this.gate = undefined;
  }

  /** Resolves once `condition` holds (checked after every hook call). */
  until(condition: () => boolean): Promise<void> {
    if (condition()) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiters.push({ ready: condition, resolve }));
  }

  /** The delays of the sleeps so far. */
  delays(): number[] {
    return this.naps.map((nap) => nap.ms);
  }

  /** Let the latest sleep end and wait for what it leads to: a launch, a give-up or a failure. */
  async wakeAndWait(what: () => boolean): Promise<void> {
    this.naps[this.naps.length - 1].wake();
    await this.until(what);
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) {
      if (waiter.ready()) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }
}

/** Resolves once every promise callback already queued has run (the hooks never wait on I/O). */
function settled(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Crash the running server and wait until its restart has been scheduled. */
async function crash(harness: Harness): Promise<void> {
  const server = harness.supervisor.server;
  expect(server).toBeDefined();
  const naps = harness.naps.length;
  const gaveUp = harness.gaveUp.length;
  harness.supervisor.exited(server as FakeServer);
  await harness.until(() => harness.naps.length > naps || harness.gaveUp.length > gaveUp);
}

describe("Supervisor", () => {
  it("starts one server on demand and reports it ready", async () => {
    const harness = new Harness();
    const server = await harness.supervisor.ready();
    expect(server).toEqual({ id: 1 });
    expect(await harness.supervisor.ready()).toBe(server);
    expect(harness.launches).toHaveLength(1);
    expect(harness.states).toEqual(["starting", "ready"]);
  });

  it("shares one launch between concurrent ready() calls", async () => {
    const harness = new Harness();
    harness.hold();
    const first = harness.supervisor.ready();
    const second = harness.supervisor.ready();
    harness.release();
    const [a, b] = await Promise.all([first, second]);
    expect(a).toBe(b);
    expect(harness.launches).toHaveLength(1);
  });

  it("restarts after crashes with growing delays", async () => {
    const harness = new Harness();
    await harness.supervisor.ready();
    for (let crashes = 1; crashes <= 3; crashes++) {
      await crash(harness);
      await harness.wakeAndWait(() => harness.launches.length === crashes + 1);
      expect(harness.supervisor.server).toEqual({ id: crashes + 1 });
    }
    expect(harness.delays()).toEqual([1000, 2000, 4000]);
    expect(harness.states).toContain("stopped: restarting in 2 s");
    expect(harness.gaveUp).toEqual([]);
  });

  it("gives up after repeated crashes, with a message that offers a fix", async () => {
    const harness = new Harness({ ...DEFAULT_BACKOFF, maxRestarts: 2 });
    await harness.supervisor.ready();
    await crash(harness);
    await harness.wakeAndWait(() => harness.launches.length === 2);
    await crash(harness);
    await harness.wakeAndWait(() => harness.launches.length === 3);
    await crash(harness);
    expect(harness.delays()).toEqual([1000, 2000]);
    expect(harness.gaveUp).toHaveLength(1);
    expect(harness.gaveUp[0]).toMatch(/stopped 2 times in a row and will not be restarted/);
    expect(harness.gaveUp[0]).toMatch(/pip install copy-as-decode|cad\.serverCommand/);
    expect(harness.states[harness.states.length - 1]).toBe("stopped: crashed");
    expect(harness.supervisor.server).toBeUndefined();
  });

  it("counts restarts that fail to launch, and gives up after them too", async () => {
    const harness = new Harness({ ...DEFAULT_BACKOFF, maxRestarts: 3 });
    await harness.supervisor.ready();
    harness.failures.push(new LaunchError(true), new LaunchError(true));
    await crash(harness);
    await harness.wakeAndWait(() => harness.naps.length === 2);
    await harness.wakeAndWait(() => harness.naps.length === 3);
    await harness.wakeAndWait(() => harness.launches.length === 2);
    expect(harness.delays()).toEqual([1000, 2000, 4000]);
    await crash(harness);
    expect(harness.gaveUp).toHaveLength(1);
  });

  it("stops retrying and reports the error when a restart cannot help", async () => {
    const harness = new Harness();
    await harness.supervisor.ready();
    const missing = new LaunchError(false);
    harness.failures.push(missing);
    await crash(harness);
    await harness.wakeAndWait(() => harness.failed.length === 1);
    expect(harness.failed).toEqual([missing]);
    expect(harness.naps).toHaveLength(1);
    expect(harness.supervisor.server).toBeUndefined();
  });

  it("starts over with a fresh budget on restart()", async () => {
    const harness = new Harness({ ...DEFAULT_BACKOFF, maxRestarts: 1 });
    await harness.supervisor.ready();
    await crash(harness);
    await harness.wakeAndWait(() => harness.launches.length === 2);
    await crash(harness);
    expect(harness.gaveUp).toHaveLength(1);
    const server = await harness.supervisor.restart();
    expect(server).toEqual({ id: 3 });
    await crash(harness);
    expect(harness.delays()).toEqual([1000, 1000]);
    expect(harness.gaveUp).toHaveLength(1);
  });

  it("starts over with a fresh budget once a server stayed up long enough", async () => {
    const harness = new Harness({ ...DEFAULT_BACKOFF, maxRestarts: 2 });
    await harness.supervisor.ready();
    await crash(harness);
    await harness.wakeAndWait(() => harness.launches.length === 2);
    harness.clock += DEFAULT_BACKOFF.resetAfterMs;
    await crash(harness);
    expect(harness.delays()).toEqual([1000, 1000]);
  });

  it("restart() stops the running server first", async () => {
    const harness = new Harness();
    await harness.supervisor.ready();
    await harness.supervisor.restart();
    expect(harness.stopped).toEqual([1]);
    expect(harness.supervisor.server).toEqual({ id: 2 });
  });

  it("does not restart after stop(), even with a restart pending", async () => {
    const harness = new Harness();
    await harness.supervisor.ready();
    await crash(harness);
    await harness.supervisor.stop();
    harness.naps[0].wake();
    await settled();
    expect(harness.launches).toHaveLength(1);
    expect(harness.supervisor.server).toBeUndefined();
    expect(harness.states[harness.states.length - 1]).toBe("stopped");
  });

  it("ignores the exit of a server it stopped itself", async () => {
    const harness = new Harness();
    const server = await harness.supervisor.ready();
    await harness.supervisor.stop();
    harness.supervisor.exited(server);
    expect(harness.naps).toEqual([]);
    expect(harness.stopped).toEqual([1]);
  });

  it("stops a server that finishes starting after stop()", async () => {
    const harness = new Harness();
    harness.hold();
    const starting = harness.supervisor.ready();
    const stopping = harness.supervisor.stop();
    harness.release();
    await expect(starting).rejects.toThrow(/stopped while it started/);
    await stopping;
    expect(harness.stopped).toEqual([1]);
    expect(harness.supervisor.server).toBeUndefined();
  });

  it("refuses to start once disposed", async () => {
    const harness = new Harness();
    await harness.supervisor.ready();
    await harness.supervisor.dispose();
    expect(harness.stopped).toEqual([1]);
    await expect(harness.supervisor.ready()).rejects.toThrow(/shutting down/);
  });
});
