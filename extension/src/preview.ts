/**
 * Preview: a dry run's edits shown as a diff against the document, applied only when accepted.
 */

import * as vscode from "vscode";

import type { EditResult } from "./lib/editArgs";
import { applyTextEdits, type TextEdit } from "./lib/textEdits";

/** The scheme of the virtual documents that hold previewed text. */
export const PREVIEW_SCHEME = "cad-preview";

/** Serves previewed texts as read-only virtual documents. */
export class PreviewDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  private counter = 0;
  readonly onDidChange = this.changed.event;

  /** Keep `text` and return the URI it is served under (named after `original`). */
  add(original: vscode.Uri, text: string): vscode.Uri {
    this.counter += 1;
    const name = original.path.split("/").pop() || "untitled";
    const uri = vscode.Uri.from({ scheme: PREVIEW_SCHEME, path: `/${this.counter}/${name}`, query: original.toString() });
    this.texts.set(uri.toString(), text);
    return uri;
  }

  /** Forget a previewed text. */
  remove(uri: vscode.Uri): void {
    this.texts.delete(uri.toString());
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }

  dispose(): void {
    this.texts.clear();
    this.changed.dispose();
  }
}

/** The vscode edit for LSP edits (both count lines and UTF-16 characters from 0). */
export function toWorkspaceEdit(uri: vscode.Uri, edits: readonly TextEdit[]): vscode.WorkspaceEdit {
  const workspaceEdit = new vscode.WorkspaceEdit();
  for (const edit of edits) {
    const { start, end } = edit.range;
    workspaceEdit.replace(
      uri,
      new vscode.Range(start.line, start.character, end.line, end.character),
      edit.newText,
    );
  }
  return workspaceEdit;
}

/**
 * Show `result` (a dry run of `document` at `result.version`) as a diff and ask whether to apply
 * it. Returns true when the edit was applied.
 */
export async function previewAndApply(
  previews: PreviewDocuments,
  document: vscode.TextDocument,
  result: EditResult,
): Promise<boolean> {
  const edits = result.edits ?? [];
  if (edits.length === 0) {
    void vscode.window.showInformationMessage("Copy-as-Decode: the edit changes nothing.");
    return false;
  }
  if (result.version !== undefined && document.version !== result.version) {
    void vscode.window.showWarningMessage(
      "Copy-as-Decode: the document changed while the edit was being decoded; nothing was applied. Run the edit again.",
    );
    return false;
  }
  const previewUri = previews.add(document.uri, applyTextEdits(document.getText(), edits));
  try {
    const name = document.uri.path.split("/").pop() || "document";
    await vscode.commands.executeCommand("vscode.diff", document.uri, previewUri, `${name} ↔ Copy-as-Decode edit`, {
      preview: true,
    });
    const choice = await vscode.window.showInformationMessage(
      `Copy-as-Decode: apply this edit to ${name}?`,
      "Apply",
      "Discard",
    );
    if (choice !== "Apply") {
      return false;
    }
    if (document.version !== result.version) {
      void vscode.window.showWarningMessage(
        "Copy-as-Decode: the document changed since the preview; nothing was applied. Run the edit again.",
      );
      return false;
    }
    return await vscode.workspace.applyEdit(toWorkspaceEdit(document.uri, edits));
  } finally {
    await closeDiff(previewUri);
    previews.remove(previewUri);
  }
}

/** Close the diff tabs that show `previewUri`. */
export async function closeDiff(previewUri: vscode.Uri): Promise<void> {
  const tabs = vscode.window.tabGroups.all
    .flatMap((group) => group.tabs)
    .filter((tab) => tab.input instanceof vscode.TabInputTextDiff && tab.input.modified.toString() === previewUri.toString());
  if (tabs.length > 0) {
    await vscode.window.tabGroups.close(tabs, true);
  }
}
