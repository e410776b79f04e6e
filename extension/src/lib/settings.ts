/**
 * The extension's settings and what the server is told about them
 * (`initializationOptions` at start, `workspace/didChangeConfiguration` afterwards).
 */

/**
 * How the model edits: `program` (it writes an edit program), `rewrite` (it rewrites the text
 * and the decoder speculates from the original), or `auto` (program with an adapter, else rewrite).
 */
export type EditMode = "auto" | "program" | "rewrite";

/** The modes the `cad.mode` setting accepts. */
export const EDIT_MODES: readonly EditMode[] = ["auto", "program", "rewrite"];

/**
 * The language an edit is held to: `auto` (by the document's language), `python`, `json`, or
 * `none`; the server refuses an edit that would leave the file unparsable.
 */
export type SyntaxChoice = "auto" | "python" | "json" | "none";

/** The choices the `cad.syntax` setting accepts. */
export const SYNTAX_CHOICES: readonly SyntaxChoice[] = ["auto", "python", "json", "none"];

/**
 * Defaults; they match package.json's. An empty `model` leaves the choice to the server: the
 * adapter's base model, else its default model (which only the server names).
 */
export const DEFAULTS = {
  serverCommand: "cad",
  model: "",
  device: "auto",
  dtype: "auto",
  adapter: "",
  maxNewTokens: 2048,
  draftBudget: null,
  mode: "auto",
  snap: false,
  preview: false,
  engine: "",
  syntax: "auto",
} as const satisfies CadSettings;

/** Every `cad.*` setting, as the extension uses them. */
export interface CadSettings {
  /** From the user's (or the remote machine's) settings only: a workspace cannot set what runs. */
  serverCommand: string;
  /** Empty: the adapter's base model, else the server's default model. */
  model: string;
  device: string;
  dtype: string;
  adapter: string;
  maxNewTokens: number;
  /** Draft tokens per forward; null: the server's draft configuration's. */
  draftBudget: number | null;
  mode: EditMode;
  /** Ask the server to widen a selection to the enclosing function or class. */
  snap: boolean;
  preview: boolean;
  /** URL of a shared engine (`cad-engine`) to decode on; empty: decode in the server. */
  engine: string;
  syntax: SyntaxChoice;
}

/** What the server's `Settings.update` understands. */
export interface ServerSettings {
  /** Empty: the adapter's base model, else the server's default. */
  model: string;
  device: string;
  dtype: string;
  /** Omitted when empty: the server ignores null and treats any string as a folder. */
  adapter?: string;
  maxNewTokens: number;
  /** Always sent: null tells the server to use its draft configuration's budget again. */
  draftBudget: number | null;
  /** Never `auto`: the extension resolves it (see {@link serverMode}). */
  mode: "program" | "rewrite";
  /** Always sent: an empty string tells the server to decode in process again. */
  engine: string;
  syntax: SyntaxChoice;
}

/**
 * The settings that pick a host, a command or a path: where the user's code is sent, what runs,
 * and which files are loaded. Only the user's own (or the remote machine's) settings set them;
 * a workspace's value never counts, so opening a folder cannot send its code elsewhere or make
 * the server run or load something of its own. package.json declares them machine-scoped and
 * restricted in untrusted workspaces as well.
 */
export const USER_ONLY_SETTINGS: readonly string[] = ["serverCommand", "engine", "model", "adapter"];

/**
 * The value of a user-only setting from a configuration's `inspect`: the user's (or the remote
 * machine's) value, else the default; a value in a workspace's settings is ignored.
 */
export function userValue(
  inspected: { defaultValue?: unknown; globalValue?: unknown } | undefined,
): unknown {
  return inspected?.globalValue ?? inspected?.defaultValue;
}

/** Reads one setting under `cad.` (e.g. `WorkspaceConfiguration.get`). */
export type SettingReader = (key: string) => unknown;

function text(value: unknown, fallback: string): string {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : fallback;
}

/** Read and validate every setting; a missing or malformed value falls back to its default. */
export function readSettings(read: SettingReader): CadSettings {
  const tokens = Number(read("maxNewTokens"));
  const drafts = read("draftBudget");
  return {
    serverCommand: text(read("serverCommand"), DEFAULTS.serverCommand),
    model: typeof read("model") === "string" ? (read("model") as string).trim() : DEFAULTS.model,
    device: text(read("device"), DEFAULTS.device),
    dtype: text(read("dtype"), DEFAULTS.dtype),
    adapter: typeof read("adapter") === "string" ? (read("adapter") as string).trim() : DEFAULTS.adapter,
    maxNewTokens: Number.isFinite(tokens) && tokens >= 1 ? Math.floor(tokens) : DEFAULTS.maxNewTokens,
    draftBudget: typeof drafts === "number" && Number.isFinite(drafts) && drafts >= 0 ? Math.floor(drafts) : DEFAULTS.draftBudget,
    mode: EDIT_MODES.find((mode) => mode === read("mode")) ?? DEFAULTS.mode,
    snap: flag(read("snap"), DEFAULTS.snap),
    preview: flag(read("preview"), DEFAULTS.preview),
    engine: typeof read("engine") === "string" ? (read("engine") as string).trim() : DEFAULTS.engine,
    syntax: SYNTAX_CHOICES.find((choice) => choice === read("syntax")) ?? DEFAULTS.syntax,
  };
}

function flag(value: unknown, fallback: boolean): boolean {
  return typeof value === "boolean" ? value : fallback;
}

/**
 * The mode the server runs in: `auto` means program mode when an adapter is set (a model tuned
 * to write programs) and rewrite mode otherwise (any instruction model can rewrite text).
 */
export function serverMode(settings: Pick<CadSettings, "mode" | "adapter">): "program" | "rewrite" {
  if (settings.mode !== "auto") {
    return settings.mode;
  }
  return settings.adapter !== "" ? "program" : "rewrite";
}

/** The settings the server takes, for `initializationOptions` and `didChangeConfiguration`. */
export function toServerSettings(settings: CadSettings): ServerSettings {
  const server: ServerSettings = {
    model: settings.model,
    device: settings.device,
    dtype: settings.dtype,
    maxNewTokens: settings.maxNewTokens,
    draftBudget: settings.draftBudget,
    mode: serverMode(settings),
    engine: settings.engine,
    syntax: settings.syntax,
  };
  if (settings.adapter !== "") {
    server.adapter = settings.adapter;
  }
  return server;
}

/** The `workspace/didChangeConfiguration` parameters for `settings`. */
export function configurationChange(settings: CadSettings): { settings: { cad: ServerSettings } } {
  return { settings: { cad: toServerSettings(settings) } };
}

/**
 * Why a settings change needs a fresh server process, or undefined when a
 * `didChangeConfiguration` notification is enough: another server command, or an adapter
 * that was cleared (the server cannot unset one).
 */
export function restartReason(previous: CadSettings, next: CadSettings): string | undefined {
  if (previous.serverCommand !== next.serverCommand) {
    return "cad.serverCommand changed";
  }
  if (previous.adapter !== "" && next.adapter === "") {
    return "cad.adapter was cleared";
  }
  return undefined;
}

/** Whether the server needs to hear about a change from `previous` to `next`. */
export function serverSettingsChanged(previous: CadSettings, next: CadSettings): boolean {
  return JSON.stringify(toServerSettings(previous)) !== JSON.stringify(toServerSettings(next));
}
