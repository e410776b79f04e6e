/**
 * Asking for an instruction (with recent ones to pick from) and for a program.
 */

import * as vscode from "vscode";

import { historyChoices, type InstructionHistory } from "./lib/history";
import { completeProgram, looksLikeProgram } from "./lib/program";

/**
 * Ask for an instruction: type a new one or pick a recent one. Resolves to undefined when the
 * user dismisses the picker; an accepted instruction goes to the front of the history.
 */
export async function askInstruction(history: InstructionHistory, title: string): Promise<string | undefined> {
  const entries = history.entries();
  const picker = vscode.window.createQuickPick<vscode.QuickPickItem>();
  picker.title = title;
  picker.placeholder = entries.length
    ? "Say what to change (Enter), or pick a recent instruction"
    : "Say what to change, e.g. \"return 0.0 for an empty list\"";
  picker.ignoreFocusOut = true;
  picker.matchOnDescription = false;
  picker.items = historyChoices("", entries);
  const chosen = await new Promise<string | undefined>((resolve) => {
    picker.onDidChangeValue((value) => {
      picker.items = historyChoices(value, entries);
    });
    picker.onDidAccept(() => {
      const selected = picker.selectedItems[0]?.label ?? picker.value;
      resolve(selected.trim() === "" ? undefined : selected.trim());
      picker.hide();
    });
    picker.onDidHide(() => resolve(undefined));
    picker.show();
  });
  picker.dispose();
  if (chosen !== undefined) {
    await history.add(chosen);
  }
  return chosen;
}

/**
 * Ask for a program: from the clipboard when it holds one, from a file, or typed on one line
 * (`</program>` is added when missing).
 */
export async function askProgram(): Promise<string | undefined> {
  const clipboard = await vscode.env.clipboard.readText();
  type Source = vscode.QuickPickItem & { source: "clipboard" | "file" | "type" };
  const sources: Source[] = [];
  if (looksLikeProgram(clipboard)) {
    sources.push({ label: "$(clippy) From the clipboard", detail: firstLine(clipboard), source: "clipboard" });
  }
  sources.push(
    { label: "$(file) From a file…", source: "file" },
    { label: "$(edit) Type it…", description: "one line", source: "type" },
  );
  const picked = await vscode.window.showQuickPick(sources, { title: "Copy-as-Decode: program to apply" });
  if (picked === undefined) {
    return undefined;
  }
  if (picked.source === "clipboard") {
    return completeProgram(clipboard);
  }
  if (picked.source === "file") {
    const files = await vscode.window.showOpenDialog({ canSelectMany: false, title: "Program file" });
    if (files === undefined || files.length === 0) {
      return undefined;
    }
    const bytes = await vscode.workspace.fs.readFile(files[0]);
    return completeProgram(new TextDecoder("utf-8").decode(bytes));
  }
  const typed = await vscode.window.showInputBox({
    title: "Copy-as-Decode: program",
    prompt: "Ops over the numbered lines of the selection (or file); for new lines, use a program from the clipboard or a file",
    placeHolder: "<copy lines=\"1-2\"/><gen>…</gen></program>",
    ignoreFocusOut: true,
    validateInput: (value) => (looksLikeProgram(value) ? undefined : "A program starts with <copy …/>, <gen> or </program>"),
  });
  return typed === undefined ? undefined : completeProgram(typed);
}

function firstLine(text: string): string {
  const line = text.trim().split(/\r\n|\r|\n/, 1)[0] ?? "";
  return line.length > 80 ? `${line.slice(0, 77)}…` : line;
}
