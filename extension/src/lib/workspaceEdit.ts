/**
 * The LSP `WorkspaceEdit` a multi-file `cad.applyEdit` dry run returns, read into plain
 * operations: versioned text edits of open documents (an empty one only checks the version),
 * file creations with the new file's text, and deletions.
 */

import type { TextEdit } from "./textEdits";

/** Text edits of an open document at `version`; no edits: a check that it still has it. */
export interface DocumentEdit {
  kind: "edit";
  uri: string;
  version: number;
  edits: TextEdit[];
}

/** A new file at `uri` holding `text`. */
export interface FileCreation {
  kind: "create";
  uri: string;
  text: string;
}

/** The file at `uri` removed. */
export interface FileDeletion {
  kind: "delete";
  uri: string;
}

export type FileOperation = DocumentEdit | FileCreation | FileDeletion;

/** One file of a multi-file edit as the server describes it in the result's `files`. */
export interface FileStatus {
  uri: string;
  status: "modified" | "unchanged" | "created" | "deleted";
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function isTextEdit(value: unknown): value is TextEdit {
  if (!isObject(value) || typeof value.newText !== "string" || !isObject(value.range)) {
    return false;
  }
  const { start, end } = value.range;
  const isPosition = (position: unknown): boolean =>
    isObject(position) && typeof position.line === "number" && typeof position.character === "number";
  return isPosition(start) && isPosition(end);
}

/**
 * The operations of an LSP `WorkspaceEdit` with `documentChanges`, in order; the text a
 * created file gets (a `TextDocumentEdit` with no version that inserts it) is folded into
 * its creation. Throws on anything else.
 */
export function readWorkspaceEdit(value: unknown): FileOperation[] {
  if (!isObject(value) || !Array.isArray(value.documentChanges)) {
    throw new Error("the server's edit has no documentChanges");
  }
  const operations: FileOperation[] = [];
  const created = new Map<string, FileCreation>();
  for (const change of value.documentChanges as unknown[]) {
    if (!isObject(change)) {
      throw new Error("the server's edit holds a change that is not an object");
    }
    if (change.kind === "create" && typeof change.uri === "string") {
      const creation: FileCreation = { kind: "create", uri: change.uri, text: "" };
      created.set(change.uri, creation);
      operations.push(creation);
    } else if (change.kind === "delete" && typeof change.uri === "string") {
      operations.push({ kind: "delete", uri: change.uri });
    } else if (isObject(change.textDocument) && typeof change.textDocument.uri === "string" && Array.isArray(change.edits)) {
      const uri = change.textDocument.uri;
      const edits = change.edits as unknown[];
      if (!edits.every(isTextEdit)) {
        throw new Error(`the server's edit of ${uri} holds an edit that is not a TextEdit`);
      }
      const version = change.textDocument.version;
      const creation = created.get(uri);
      if (version === null && creation !== undefined) {
        creation.text += edits.map((edit) => edit.newText).join("");
      } else if (typeof version === "number") {
        operations.push({ kind: "edit", uri, version, edits });
      } else {
        throw new Error(`the server's edit of ${uri} has no version`);
      }
    } else {
      throw new Error("the server's edit holds a change that is not a text edit, a creation or a deletion");
    }
  }
  return operations;
}

/** The first document whose version is not the one the edit was made for (or that is closed). */
export function staleDocument(operations: readonly FileOperation[], versionOf: (uri: string) => number | undefined): string | undefined {
  for (const operation of operations) {
    if (operation.kind === "edit" && versionOf(operation.uri) !== operation.version) {
      return operation.uri;
    }
  }
  return undefined;
}

/** "2 files changed, 1 created, 1 deleted" for the server's `files`. */
export function describeFiles(files: readonly FileStatus[]): string {
  const count = (status: FileStatus["status"]): number => files.filter((file) => file.status === status).length;
  const changed = count("modified");
  return `${changed} file${changed === 1 ? "" : "s"} changed, ${count("created")} created, ${count("deleted")} deleted`;
}
