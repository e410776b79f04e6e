/**
 * Pairing the server's work-done progress with the edits in flight, so that each edit's one
 * notification shows the server's reports and its Cancel button cancels the server's progress
 * token (`window/workDoneProgress/cancel`).
 *
 * The server creates a token while it handles a `cad.applyEdit` request and begins progress on
 * it before it handles the next request; an edit it rejects answers without progress. Messages
 * on one connection arrive in order, so a `begin` belongs to the oldest edit still waiting for
 * one.
 */

/** A progress token: LSP allows numbers and strings. */
export type ProgressToken = number | string;

/** One edit's side of the pairing. */
export interface EditProgress {
  /** The server's token while its progress runs; undefined before `begin` and after `end`. */
  readonly token: ProgressToken | undefined;
  /** The edit is finished (its answer arrived): forget it. */
  close(): void;
}

interface Entry {
  sink: (message: string) => void;
  token: ProgressToken | undefined;
}

/** Routes `$/progress` notifications to the edit each token belongs to. */
export class ProgressRouter {
  private readonly waiting: Entry[] = [];
  private readonly bound = new Map<ProgressToken, Entry>();

  /** An edit is about to be sent; `sink` receives the server's progress messages for it. */
  open(sink: (message: string) => void): EditProgress {
    const entry: Entry = { sink, token: undefined };
    this.waiting.push(entry);
    return {
      get token() {
        return entry.token;
      },
      close: () => this.forget(entry),
    };
  }

  /**
   * The server began progress on `token`. Returns whether an edit took it (false: progress of
   * something else, left to the language client).
   */
  begin(token: ProgressToken, message?: string): boolean {
    const entry = this.waiting.shift();
    if (entry === undefined) {
      return false;
    }
    entry.token = token;
    this.bound.set(token, entry);
    if (message) {
      entry.sink(message);
    }
    return true;
  }

  /** A report on `token`; returns whether an edit took it. */
  report(token: ProgressToken, message?: string): boolean {
    const entry = this.bound.get(token);
    if (entry === undefined) {
      return false;
    }
    if (message) {
      entry.sink(message);
    }
    return true;
  }

  /** The server ended progress on `token`; returns whether it belonged to an edit. */
  end(token: ProgressToken): boolean {
    const entry = this.bound.get(token);
    if (entry === undefined) {
      return false;
    }
    this.bound.delete(token);
    entry.token = undefined;
    return true;
  }

  private forget(entry: Entry): void {
    const index = this.waiting.indexOf(entry);
    if (index >= 0) {
      this.waiting.splice(index, 1);
    }
    if (entry.token !== undefined) {
      this.bound.delete(entry.token);
      entry.token = undefined;
    }
  }
}
