/**
 * Edits of several open documents (Apply Program to Files…, Edit Files with Instruction…),
 * previewed file by file before anything is applied.
 *
 * The server makes the edit as a dry run and returns one LSP `WorkspaceEdit`. The extension
 * opens a diff per changed or created file (the old text, or nothing, against the new) and asks
 * once whether to apply the whole edit, naming every file, deleted ones included; on "Apply" it
 * applies the edit as one `vscode.WorkspaceEdit`, all or nothing. Nothing is applied when a
 * document changed since the edit was made. (VS Code's refactor preview is not used: it opens
 * an extension's edits with every entry unticked, so its "Apply" alone applies nothing.)
 */

import * as vscode from "vscode";

import type { EditResult } from "./lib/editArgs";
import { applyTextEdits } from "./lib/textEdits";
import { describeFiles, type FileOperation, readWorkspaceEdit, staleDocument } from "./lib/workspaceEdit";
import { closeDiff, type PreviewDocuments } from "./preview";

/** A document offered in the pickers. */
interface DocumentItem extends vscode.QuickPickItem {
  document: vscode.TextDocument;
}

/** The open documents a program can address: files and untitled documents, the active one first. */
export function candidateDocuments(): vscode.TextDocument[] {
  const active = vscode.window.activeTextEditor?.document;
  const documents = vscode.workspace.textDocuments.filter(
    (document) => !document.isClosed && (document.uri.scheme === "file" || document.uri.scheme === "untitled"),
  );
  const rest = documents.filter((document) => document !== active).sort((a, b) => shownPath(a.uri).localeCompare(shownPath(b.uri)));
  return active !== undefined && documents.includes(active) ? [active, ...rest] : rest;
}

/** A document's path relative to its workspace folder, else its whole path. */
export function shownPath(uri: vscode.Uri): string {
  const folder = vscode.workspace.getWorkspaceFolder(uri);
  if (folder !== undefined && uri.path.startsWith(`${folder.uri.path}/`)) {
    return uri.path.slice(folder.uri.path.length + 1);
  }
  return uri.scheme === "file" ? uri.fsPath : uri.toString();
}

function item(document: vscode.TextDocument, picked: boolean): DocumentItem {
  return { label: shownPath(document.uri), picked, document };
}

/** The documents an edit of several files writes (files 1, 2, …) and copies from (context). */
export interface PickedDocuments {
  edit: vscode.TextDocument[];
  context: vscode.TextDocument[];
}

/**
 * Ask for the documents to edit (numbered 1, 2, … in the order listed) and then for context
 * documents (numbered after them), which the program may copy from but not change. Resolves to
 * undefined when the user dismisses a picker.
 */
export async function pickDocuments(): Promise<PickedDocuments | undefined> {
  const documents = candidateDocuments();
  if (documents.length === 0) {
    void vscode.window.showWarningMessage("Copy-as-Decode: open the files to edit first.");
    return undefined;
  }
  const active = vscode.window.activeTextEditor?.document;
  const chosen = await vscode.window.showQuickPick(
    documents.map((document) => item(document, document === active)),
    {
      canPickMany: true,
      title: "Copy-as-Decode: files to edit",
      placeHolder: 'The program numbers them 1, 2, … in this order (<edit file="1">)',
      ignoreFocusOut: true,
    },
  );
  if (chosen === undefined || chosen.length === 0) {
    return undefined;
  }
  const edit = documents.filter((document) => chosen.some((picked) => picked.document === document));
  const rest = documents.filter((document) => !edit.includes(document));
  let context: vscode.TextDocument[] = [];
  if (rest.length > 0) {
    const extra = await vscode.window.showQuickPick(
      rest.map((document) => item(document, false)),
      {
        canPickMany: true,
        title: "Copy-as-Decode: context files to copy from (optional)",
        placeHolder: `Numbered ${edit.length + 1}, ${edit.length + 2}, … in this order; the program copies from them but does not change them`,
        ignoreFocusOut: true,
      },
    );
    if (extra === undefined) {
      return undefined;
    }
    context = rest.filter((document) => extra.some((picked) => picked.document === document));
  }
  return { edit, context };
}

/** The folder created files go under: the workspace folder of the first document, if it has one. */
export function createRoot(document: vscode.TextDocument): string | undefined {
  return vscode.workspace.getWorkspaceFolder(document.uri)?.uri.toString();
}

/** The `vscode.WorkspaceEdit` of the operations; version checks add nothing. */
export function toWorkspaceEdit(operations: readonly FileOperation[]): vscode.WorkspaceEdit {
  const edit = new vscode.WorkspaceEdit();
  for (const operation of operations) {
    const uri = vscode.Uri.parse(operation.uri);
    if (operation.kind === "edit") {
      for (const change of operation.edits) {
        const { start, end } = change.range;
        const range = new vscode.Range(start.line, start.character, end.line, end.character);
        edit.replace(uri, range, change.newText);
      }
    } else if (operation.kind === "create") {
      const contents = new TextEncoder().encode(operation.text);
      edit.createFile(uri, { overwrite: false, ignoreIfExists: false, contents });
    } else {
      edit.deleteFile(uri, { recursive: false, ignoreIfNotExists: false });
    }
  }
  return edit;
}

/** Open a diff of every changed and created file; returns the preview documents it made. */
async function showDiffs(previews: PreviewDocuments, operations: readonly FileOperation[]): Promise<vscode.Uri[]> {
  const made: vscode.Uri[] = [];
  for (const operation of operations) {
    const uri = vscode.Uri.parse(operation.uri);
    const name = shownPath(uri);
    if (operation.kind === "edit" && operation.edits.length > 0) {
      const document = vscode.workspace.textDocuments.find((open) => open.uri.toString() === operation.uri);
      if (document === undefined) {
        continue;
      }
      const after = previews.add(uri, applyTextEdits(document.getText(), operation.edits));
      made.push(after);
      await vscode.commands.executeCommand("vscode.diff", uri, after, `${name} ↔ Copy-as-Decode edit`, { preview: false });
    } else if (operation.kind === "create") {
      const before = previews.add(uri, "");
      const after = previews.add(uri, operation.text);
      made.push(before, after);
      await vscode.commands.executeCommand("vscode.diff", before, after, `${name} (new) ↔ Copy-as-Decode edit`, {
        preview: false,
      });
    }
  }
  return made;
}

async function exists(uri: string): Promise<boolean> {
  try {
    await vscode.workspace.fs.stat(vscode.Uri.parse(uri));
    return true;
  } catch {
    return false;
  }
}

/**
 * Preview a multi-file dry run (a diff per file) and apply it, all or nothing, when the user
 * accepts. Refuses, applying nothing, when a document changed since the edit was made or a
 * file to create exists. Returns true when the edit was applied.
 */
export async function previewAndApplyFiles(previews: PreviewDocuments, result: EditResult): Promise<boolean> {
  const operations = readWorkspaceEdit(result.edit);
  if (!operations.some((operation) => operation.kind !== "edit" || operation.edits.length > 0)) {
    void vscode.window.showInformationMessage("Copy-as-Decode: the program changes nothing.");
    return false;
  }
  if (!(await applicable(operations))) {
    return false;
  }
  const made = await showDiffs(previews, operations);
  try {
    const files = describeFiles(result.files ?? []);
    const deleted = operations.filter((operation) => operation.kind === "delete");
    const deleting = deleted.length
      ? `, deleting ${deleted.map((operation) => shownPath(vscode.Uri.parse(operation.uri))).join(", ")}`
      : "";
    const choice = await vscode.window.showInformationMessage(
      `Copy-as-Decode: apply this edit (${files}${deleting})?`,
      "Apply",
      "Discard",
    );
    if (choice !== "Apply") {
      void vscode.window.showInformationMessage("Copy-as-Decode: the edit was not applied.");
      return false;
    }
    if (!(await applicable(operations))) {
      return false;
    }
    // Text edits first, then creations, then deletions: VS Code checks the documents' versions
    // before it changes anything.
    const order = { edit: 0, create: 1, delete: 2 };
    const sorted = [...operations].sort((a, b) => order[a.kind] - order[b.kind]);
    const applied = await vscode.workspace.applyEdit(toWorkspaceEdit(sorted));
    if (applied) {
      vscode.window.setStatusBarMessage(`Copy-as-Decode: program applied (${files}).`, 5000);
    } else {
      void vscode.window.showInformationMessage("Copy-as-Decode: the edit was not applied.");
    }
    return applied;
  } finally {
    for (const uri of made) {
      await closeDiff(uri);
      previews.remove(uri);
    }
  }
}

/**
 * Whether the edit can still apply: no file to create exists and every document is at the
 * version the edit was made for. Says why not.
 */
async function applicable(operations: readonly FileOperation[]): Promise<boolean> {
  for (const operation of operations) {
    if (operation.kind === "create" && (await exists(operation.uri))) {
      void vscode.window.showWarningMessage(
        `Copy-as-Decode: ${shownPath(vscode.Uri.parse(operation.uri))} already exists; nothing was applied. Open it and give it as a file to edit.`,
      );
      return false;
    }
  }
  const versionOf = (uri: string): number | undefined =>
    vscode.workspace.textDocuments.find((document) => document.uri.toString() === uri && !document.isClosed)?.version;
  const stale = staleDocument(operations, versionOf);
  if (stale !== undefined) {
    void vscode.window.showWarningMessage(
      `Copy-as-Decode: ${shownPath(vscode.Uri.parse(stale))} changed while the edit was being made; nothing was applied. Run the edit again.`,
    );
    return false;
  }
  return true;
}
