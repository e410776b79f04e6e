/**
 * What the status bar item shows for each server state. The server sends
 * `cad/status {state, message}` with `loading`, `editing`, `ready` or `error`; the extension
 * adds `starting` and `stopped` for the process itself.
 */

/** The notification the server sends. */
export const STATUS_NOTIFICATION = "cad/status";

/** Every state the item can show. */
export type ServerState = "starting" | "loading" | "ready" | "editing" | "error" | "stopped";

/** Parameters of `cad/status`. */
export interface StatusParams {
  state: string;
  message?: string;
}

/** How the item looks and what clicking it does. */
export interface StatusView {
  state: ServerState;
  /** Item text with codicons, e.g. `$(sync~spin) cad: loading`. */
  text: string;
  tooltip: string;
  /** Background: errors red, a stopped server yellow. */
  severity: "normal" | "warning" | "error";
  /** The command run on click. */
  command: string;
}

const KNOWN: readonly ServerState[] = ["starting", "loading", "ready", "editing", "error", "stopped"];

/** The state for a `cad/status` notification; anything unknown reads as `ready`. */
export function parseStatus(params: unknown): { state: ServerState; message: string } {
  if (typeof params !== "object" || params === null) {
    return { state: "ready", message: "" };
  }
  const { state, message } = params as Record<string, unknown>;
  const known = typeof state === "string" && (KNOWN as readonly string[]).includes(state);
  return { state: known ? (state as ServerState) : "ready", message: typeof message === "string" ? message : "" };
}

/** The item for `state`; `message` is the server's detail (model name, error text). */
export function statusView(state: ServerState, message = ""): StatusView {
  const detail = message ? `: ${message}` : "";
  switch (state) {
    case "starting":
      return {
        state,
        text: "$(sync~spin) cad",
        tooltip: "Copy-as-Decode: starting the language server…",
        severity: "normal",
        command: "cad.showOutput",
      };
    case "loading":
      return {
        state,
        text: "$(sync~spin) cad: loading",
        tooltip: `Copy-as-Decode: loading the model${detail} (the first edit waits for it). Click to cancel.`,
        severity: "normal",
        command: "cad.cancel",
      };
    case "editing":
      return {
        state,
        text: "$(sync~spin) cad: editing",
        tooltip: "Copy-as-Decode: decoding an edit. Click to cancel.",
        severity: "normal",
        command: "cad.cancel",
      };
    case "error":
      return {
        state,
        text: "$(error) cad",
        tooltip: `Copy-as-Decode: the last edit failed${detail}. Click for the server output.`,
        severity: "error",
        command: "cad.showOutput",
      };
    case "stopped":
      return {
        state,
        text: "$(debug-disconnect) cad",
        tooltip: `Copy-as-Decode: the language server is not running${detail}. Click to restart it.`,
        severity: "warning",
        command: "cad.restartServer",
      };
    case "ready":
      return {
        state,
        text: "$(check) cad",
        tooltip: "Copy-as-Decode: ready. Click to edit the selection with an instruction.",
        severity: "normal",
        command: "cad.editSelection",
      };
  }
}
