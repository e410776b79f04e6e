/**
 * Keeps one server running: starts it on demand, restarts it with back-off when it exits on its
 * own, and gives up after too many failures in a row. Generic over the server handle (the
 * extension's is a language client) so it runs without VS Code.
 */

import { type BackoffOptions, DEFAULT_BACKOFF, RestartPolicy } from "./backoff";
import { crashMessage } from "./serverCommand";
import type { ServerState } from "./status";

/** What the supervisor does to servers and tells the world. */
export interface SupervisorHooks<T> {
  /** Start a server; resolves once it answers requests. */
  launch(): Promise<T>;
  /** Stop a server (it will not be restarted). */
  stop(server: T): Promise<void>;
  /** Whether trying again after this launch error can help (a missing executable cannot). */
  retryable(error: unknown): boolean;
  /** The server's state changed. */
  state(state: ServerState, message: string): void;
  /** Restarts are exhausted (shown once per run of failures). */
  gaveUp(message: string): void;
  /** A restart that cannot help failed (shown to the user). */
  failed(error: unknown): void;
  /** A line for the log. */
  log(line: string): void;
  /** Milliseconds since some origin. */
  now(): number;
  /** Resolve after `ms` milliseconds. */
  sleep(ms: number): Promise<void>;
}

/** One server at a time, restarted after crashes by a {@link RestartPolicy}. */
export class Supervisor<T> {
  private current: T | undefined;
  private starting: Promise<T> | undefined;
  private readonly policy: RestartPolicy;
  /** Bumped by every stop: a pending restart of an older generation is dropped. */
  private generation = 0;
  private disposed = false;

  constructor(
    private readonly hooks: SupervisorHooks<T>,
    options: BackoffOptions = DEFAULT_BACKOFF,
  ) {
    this.policy = new RestartPolicy(options);
  }

  /** The running server, if any. */
  get server(): T | undefined {
    return this.current;
  }

  /** The running server, starting one first when needed (one start at a time). */
  ready(): Promise<T> {
    if (this.current !== undefined) {
      return Promise.resolve(this.current);
    }
    if (this.starting === undefined) {
      this.starting = this.launch().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  /** Stop the current server and start a fresh one with a fresh restart budget. */
  async restart(): Promise<T> {
    this.policy.reset();
    await this.stop();
    return this.ready();
  }

  /**
   * Stop the current server, and one that is starting once it has started; pending restarts
   * are dropped. Resolves when no server of this supervisor runs.
   */
  async stop(): Promise<void> {
    this.generation += 1;
    await this.starting?.catch(() => undefined);
    const server = this.current;
    this.current = undefined;
    if (server !== undefined) {
      try {
        await this.hooks.stop(server);
      } catch (error) {
        this.hooks.log(`stopping the server: ${String(error)}`);
      }
    }
    this.hooks.state("stopped", "");
  }

  /** Stop for good. */
  async dispose(): Promise<void> {
    this.disposed = true;
    await this.stop();
  }

  /** `server` exited without being asked to: restart it after a delay, or give up. */
  exited(server: T): void {
    if (server !== this.current || this.disposed) {
      return; // a server being stopped or replaced, or one that never finished starting
    }
    this.current = undefined;
    this.scheduleRestart();
  }

  /** Launch one server; one that was stopped meanwhile is stopped again and not kept. */
  private async launch(): Promise<T> {
    if (this.disposed) {
      throw new Error("shutting down");
    }
    const generation = this.generation;
    this.hooks.state("starting", "");
    let server: T;
    try {
      server = await this.hooks.launch();
    } catch (error) {
      this.hooks.state("stopped", "failed to start");
      throw error;
    }
    if (generation !== this.generation || this.disposed) {
      await this.hooks.stop(server).catch(() => undefined);
      throw new Error("the server was stopped while it started");
    }
    this.current = server;
    this.policy.started(this.hooks.now());
    this.hooks.state("ready", "");
    return server;
  }

  /** Restart after the policy's delay; a failed restart schedules the next, until it gives up. */
  private scheduleRestart(): void {
    const decision = this.policy.exited(this.hooks.now());
    if (!decision.restart) {
      this.hooks.state("stopped", "crashed");
      this.hooks.gaveUp(crashMessage(decision.attempts));
      return;
    }
    const seconds = Math.round(decision.delayMs / 100) / 10;
    const generation = this.generation;
    this.hooks.log(`the server stopped; restart ${decision.attempt} in ${seconds} s`);
    this.hooks.state("stopped", `restarting in ${seconds} s`);
    void this.hooks.sleep(decision.delayMs).then(async () => {
      if (generation !== this.generation || this.disposed || this.current !== undefined || this.starting !== undefined) {
        return;
      }
      try {
        await this.ready();
      } catch (error) {
        this.hooks.log(`restart failed: ${error instanceof Error ? error.message : String(error)}`);
        if (generation !== this.generation || this.disposed) {
          return;
        }
        if (this.hooks.retryable(error)) {
          this.scheduleRestart();
        } else {
          this.hooks.failed(error);
        }
      }
    });
  }
}
