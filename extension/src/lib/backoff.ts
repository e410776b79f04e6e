/**
 * When to restart a server that exited: exponential back-off, a bounded number of tries, and a
 * fresh budget once the server has stayed up for a while.
 */

/** Parameters of the back-off. */
export interface BackoffOptions {
  /** Restarts allowed in a row before giving up. */
  maxRestarts: number;
  /** Delay before the first restart, in milliseconds. */
  initialDelayMs: number;
  /** Each further delay is the previous one times this. */
  factor: number;
  /** No delay is longer than this. */
  maxDelayMs: number;
  /** A server that ran this long before exiting counts as healthy: the tries start over. */
  resetAfterMs: number;
}

/** Defaults: 5 restarts after 1, 2, 4, 8 and 16 seconds; reset after 3 minutes up. */
export const DEFAULT_BACKOFF: BackoffOptions = {
  maxRestarts: 5,
  initialDelayMs: 1000,
  factor: 2,
  maxDelayMs: 30000,
  resetAfterMs: 3 * 60 * 1000,
};

/** What to do after the server exited. */
export type RestartDecision = { restart: true; delayMs: number; attempt: number } | { restart: false; attempts: number };

/** Tracks restarts of one server; time is passed in so the policy is deterministic. */
export class RestartPolicy {
  private attempts = 0;
  private startedAt: number | undefined;

  constructor(private readonly options: BackoffOptions = DEFAULT_BACKOFF) {}

  /** Record that the server (re)started at `now`. */
  started(now: number): void {
    this.startedAt = now;
  }

  /** Decide, at `now`, what to do about an exit. */
  exited(now: number): RestartDecision {
    if (this.startedAt !== undefined && now - this.startedAt >= this.options.resetAfterMs) {
      this.attempts = 0;
    }
    this.startedAt = undefined;
    if (this.attempts >= this.options.maxRestarts) {
      return { restart: false, attempts: this.attempts };
    }
    const delayMs = Math.min(this.options.initialDelayMs * this.options.factor ** this.attempts, this.options.maxDelayMs);
    this.attempts += 1;
    return { restart: true, delayMs, attempt: this.attempts };
  }

  /** Forget past exits (a restart the user asked for). */
  reset(): void {
    this.attempts = 0;
    this.startedAt = undefined;
  }
}
