/**
 * The one object argument of the server's `cad.applyEdit` command, and what comes back.
 */

import type { Range, TextEdit } from "./textEdits";
import type { FileStatus } from "./workspaceEdit";

/** The command the server executes. */
export const APPLY_EDIT = "cad.applyEdit";

/** Argument of `cad.applyEdit`: `{uri, instruction, range?, program?, snap?, dryRun?}`. */
export interface EditArgument {
  uri: string;
  instruction: string;
  range?: Range;
  program?: string;
  /** Widen `range` to the enclosing function or class before editing. */
  snap?: boolean;
  dryRun?: boolean;
}

/**
 * Argument of `cad.applyEdit` over several documents: a multi-file program over `uris` (files
 * 1, 2, … in that order), then the `context` documents it may copy from but not change; files
 * it creates go under the folder `root` (by default the folder of the first document).
 */
export interface MultiEditArgument {
  uris: string[];
  context?: string[];
  /** The multi-file program to apply; without it the server's model decodes `instruction`. */
  program?: string;
  instruction?: string;
  root?: string;
  dryRun?: boolean;
}

/**
 * Result of `cad.applyEdit`. `edits` and `version` come with dry runs of one document; `files`
 * with edits of several documents, whose dry runs return the LSP `WorkspaceEdit` as `edit`.
 */
export interface EditResult {
  applied: boolean;
  program: string;
  stats: Record<string, unknown>;
  reason?: string;
  edits?: TextEdit[];
  version?: number;
  files?: FileStatus[];
  edit?: unknown;
  /** With reason `document changed` over several documents: the one that changed. */
  changed?: string;
}

/** What a command wants edited. */
export interface EditRequest {
  uri: string;
  /** The instruction for the model; may be empty when a program is given. */
  instruction: string;
  /** Lines to edit; the whole document when absent. */
  range?: Range;
  /** Follow this program instead of decoding one. */
  program?: string;
  /** Ask the server to widen the range to the enclosing function or class (`cad.snap`). */
  snap?: boolean;
  /** Return the edits instead of applying them. */
  dryRun?: boolean;
}

/**
 * Build the `cad.applyEdit` argument. The server edits whole lines: from the start line of the
 * range to its end line, where an end at character 0 of a later line leaves that line out.
 * `snap` is sent only with a range and without a program: a given program numbers the lines of
 * the selection as it is, so widening it would shift every line number.
 */
export function buildEditArgument(request: EditRequest): EditArgument {
  const argument: EditArgument = { uri: request.uri, instruction: request.instruction.trim() };
  if (request.range !== undefined) {
    argument.range = {
      start: { line: request.range.start.line, character: request.range.start.character },
      end: { line: request.range.end.line, character: request.range.end.character },
    };
  }
  if (request.program !== undefined) {
    argument.program = request.program;
  }
  if (request.snap && argument.range !== undefined && argument.program === undefined) {
    argument.snap = true;
  }
  if (request.dryRun) {
    argument.dryRun = true;
  }
  return argument;
}

/**
 * The range to edit for an editor selection: the selection itself, or the cursor's whole line
 * when the selection is empty (the start of the next line, so the server takes just that line).
 */
export function selectionRange(selection: Range): Range {
  const { start, end } = selection;
  const before = start.line < end.line || (start.line === end.line && start.character <= end.character);
  const [first, last] = before ? [start, end] : [end, start];
  if (first.line === last.line && first.character === last.character) {
    return { start: { line: first.line, character: 0 }, end: { line: first.line + 1, character: 0 } };
  }
  return { start: { ...first }, end: { ...last } };
}

/** The zero-based first and last line the server will edit for `range` (inclusive). */
export function editedLines(range: Range): { first: number; last: number } {
  const first = range.start.line;
  let last = range.end.line;
  if (range.end.character === 0 && last > first) {
    last -= 1;
  }
  return { first, last };
}

/** Whether `value` has the shape of an {@link EditResult}. */
export function isEditResult(value: unknown): value is EditResult {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const candidate = value as Record<string, unknown>;
  return typeof candidate.applied === "boolean" && typeof candidate.program === "string";
}

/** One line for the user saying how an edit ended. */
export function describeResult(result: EditResult): string {
  if (result.applied) {
    const details = describeStats(result.stats);
    return details ? `Copy-as-Decode: edit applied (${details}).` : "Copy-as-Decode: edit applied.";
  }
  switch (result.reason) {
    case "cancelled":
      return "Copy-as-Decode: the edit was cancelled; nothing was changed.";
    case "superseded":
      return "Copy-as-Decode: a newer edit of this document replaced this one.";
    case "document changed":
      return "Copy-as-Decode: the document changed while the edit was being decoded; nothing was applied. Run the edit again.";
    case undefined:
      return result.edits !== undefined
        ? "Copy-as-Decode: edit ready to preview."
        : "Copy-as-Decode: the edit was not applied.";
    default:
      return `Copy-as-Decode: the edit was not applied (${result.reason}).`;
  }
}

/** A short summary of the server's stats (ops, lines copied and generated, wall time). */
export function describeStats(stats: Record<string, unknown>): string {
  const parts: string[] = [];
  const number = (key: string): number | undefined => {
    const value = stats[key];
    return typeof value === "number" ? value : undefined;
  };
  const ops = number("ops");
  if (ops !== undefined) {
    parts.push(`${ops} op${ops === 1 ? "" : "s"}`);
  }
  const copied = number("lines_copied");
  const generated = number("lines_generated");
  if (copied !== undefined) {
    parts.push(`${copied} line${copied === 1 ? "" : "s"} copied`);
  }
  if (generated !== undefined) {
    parts.push(`${generated} generated`);
  }
  const seconds = number("wall_s");
  if (seconds !== undefined) {
    parts.push(`${seconds.toFixed(1)} s`);
  }
  return parts.join(", ");
}
