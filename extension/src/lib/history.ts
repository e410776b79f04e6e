/**
 * Recent instructions, most recent first, kept in a key-value store (the extension's
 * `globalState`).
 */

/** The store key. */
export const HISTORY_KEY = "cad.instructionHistory";

/** How many instructions are kept. */
export const HISTORY_LIMIT = 30;

/** The subset of `vscode.Memento` the history needs. */
export interface KeyValueStore {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): Thenable<void> | Promise<void>;
}

/** `entry` first, without duplicates or blanks, at most `limit` entries. */
export function pushHistory(history: readonly string[], entry: string, limit: number = HISTORY_LIMIT): string[] {
  const trimmed = entry.trim();
  const rest = history.filter((item) => item !== trimmed && item.trim() !== "");
  return (trimmed === "" ? rest : [trimmed, ...rest]).slice(0, Math.max(limit, 0));
}

/** A choice in the instruction picker. */
export interface Choice {
  label: string;
  description?: string;
}

/**
 * The picker's choices while the user types `value`: what they typed first (unless it is
 * already a history entry), then the history entries.
 */
export function historyChoices(value: string, history: readonly string[]): Choice[] {
  const typed = value.trim();
  const fromHistory = history.map((label) => ({ label, description: "recent" }));
  if (typed === "" || history.includes(typed)) {
    return fromHistory;
  }
  return [{ label: typed }, ...fromHistory];
}

/** Instruction history backed by a {@link KeyValueStore}. */
export class InstructionHistory {
  constructor(
    private readonly store: KeyValueStore,
    private readonly limit: number = HISTORY_LIMIT,
  ) {}

  /** The entries, most recent first (malformed stored values are dropped). */
  entries(): string[] {
    const stored = this.store.get<unknown>(HISTORY_KEY);
    return Array.isArray(stored) ? stored.filter((item): item is string => typeof item === "string").slice(0, this.limit) : [];
  }

  /** Put `entry` first. */
  async add(entry: string): Promise<void> {
    await this.store.update(HISTORY_KEY, pushHistory(this.entries(), entry, this.limit));
  }

  /** Forget every entry. */
  async clear(): Promise<void> {
    await this.store.update(HISTORY_KEY, []);
  }
}
