/**
 * The user-facing commands: edit the selection or the file with an instruction, apply a given
 * program (to the selection, or a multi-file program to several files), edit several files with
 * one instruction, cancel running edits.
 */

import * as vscode from "vscode";

import { buildEditArgument, describeResult, type EditRequest, type MultiEditArgument, selectionRange } from "./lib/editArgs";
import type { InstructionHistory } from "./lib/history";
import type { CadSettings } from "./lib/settings";
import type { Range } from "./lib/textEdits";
import { createRoot, type PickedDocuments, pickDocuments, previewAndApplyFiles } from "./multiFile";
import { type PreviewDocuments, previewAndApply } from "./preview";
import { askInstruction, askProgram } from "./prompt";
import { type EditServer, errorText, ServerUnavailableError } from "./server";

/** A code action's target: `{uri, range}` as the server sends it. */
interface Target {
  uri: string;
  range?: Range;
}

function isTarget(value: unknown): value is Target {
  return typeof value === "object" && value !== null && typeof (value as Target).uri === "string";
}

/** What the commands need. */
export interface CommandContext {
  server: EditServer;
  history: InstructionHistory;
  previews: PreviewDocuments;
  /** The settings that shape each edit (`cad.preview`, `cad.snap`), read at each edit. */
  settings: () => Pick<CadSettings, "preview" | "snap">;
}

/** Runs edits and remembers how to cancel the ones in flight. */
export class EditCommands implements vscode.Disposable {
  private readonly running = new Set<vscode.CancellationTokenSource>();

  constructor(private readonly context: CommandContext) {}

  /** Register every command. */
  register(): vscode.Disposable[] {
    return [
      vscode.commands.registerCommand("cad.editSelection", (target?: unknown) => this.editSelection(target)),
      vscode.commands.registerCommand("cad.editFile", () => this.editFile()),
      vscode.commands.registerCommand("cad.applyProgram", (target?: unknown) => this.applyProgram(target)),
      vscode.commands.registerCommand("cad.editFiles", () => this.editFiles()),
      vscode.commands.registerCommand("cad.applyProgramToFiles", () => this.applyProgramToFiles()),
      vscode.commands.registerCommand("cad.cancel", () => this.cancelAll()),
      vscode.commands.registerCommand("cad.clearHistory", async () => {
        await this.context.history.clear();
        void vscode.window.showInformationMessage("Copy-as-Decode: instruction history cleared.");
      }),
    ];
  }

  /** Edit the selected lines (the cursor's line when nothing is selected, or a code action's range). */
  async editSelection(target?: unknown): Promise<void> {
    const where = await this.resolveTarget(target, true);
    if (where === undefined) {
      return;
    }
    const instruction = await askInstruction(this.context.history, "Copy-as-Decode: edit the selection");
    if (instruction !== undefined) {
      await this.run(where.document, { uri: where.document.uri.toString(), instruction, range: where.range });
    }
  }

  /** Edit the whole file of the active editor. */
  async editFile(): Promise<void> {
    const where = await this.resolveTarget(undefined, false);
    if (where === undefined) {
      return;
    }
    const instruction = await askInstruction(this.context.history, "Copy-as-Decode: edit the file");
    if (instruction !== undefined) {
      await this.run(where.document, { uri: where.document.uri.toString(), instruction });
    }
  }

  /** Apply a program to the selection (or the whole file when nothing is selected). */
  async applyProgram(target?: unknown): Promise<void> {
    const where = await this.resolveTarget(target, false);
    if (where === undefined) {
      return;
    }
    const program = await askProgram();
    if (program !== undefined) {
      await this.run(where.document, {
        uri: where.document.uri.toString(),
        instruction: "",
        program,
        range: where.range,
      });
    }
  }

  /**
   * Edit several open documents picked by the user (copying from context documents) with one
   * instruction: the server's model writes one multi-file program, and every file is previewed
   * as a diff before anything is applied.
   */
  async editFiles(): Promise<void> {
    const picked = await pickDocuments();
    if (picked === undefined) {
      return;
    }
    const instruction = await askInstruction(this.context.history, "Copy-as-Decode: edit the files");
    if (instruction === undefined) {
      return;
    }
    await this.runOnFiles(picked, { instruction }, "Copy-as-Decode: editing the files");
  }

  /**
   * Apply a multi-file program to open documents picked by the user (and copy from context
   * documents), previewing every file as a diff before anything is applied.
   */
  async applyProgramToFiles(): Promise<void> {
    const picked = await pickDocuments();
    if (picked === undefined) {
      return;
    }
    const program = await askProgram();
    if (program === undefined) {
      return;
    }
    await this.runOnFiles(picked, { program }, "Copy-as-Decode: applying the program");
  }

  /** Send an edit of the picked documents as a dry run, then preview and apply its result. */
  private async runOnFiles(
    picked: PickedDocuments,
    what: { program: string } | { instruction: string },
    title: string,
  ): Promise<void> {
    const argument: MultiEditArgument = {
      uris: picked.edit.map((document) => document.uri.toString()),
      ...what,
      dryRun: true,
    };
    if (picked.context.length > 0) {
      argument.context = picked.context.map((document) => document.uri.toString());
    }
    const root = createRoot(picked.edit[0]);
    if (root !== undefined) {
      argument.root = root;
    }
    const source = new vscode.CancellationTokenSource();
    this.running.add(source);
    try {
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title, cancellable: true },
        async (_progress, token) => {
          const subscription = token.onCancellationRequested(() => source.cancel());
          try {
            return await this.context.server.applyEdit(argument, source.token);
          } finally {
            subscription.dispose();
          }
        },
      );
      if (result === undefined || source.token.isCancellationRequested) {
        void vscode.window.showInformationMessage("Copy-as-Decode: the edit was cancelled; nothing was changed.");
        return;
      }
      if (result.edit === undefined) {
        if (result.reason !== "document changed") {
          void vscode.window.showWarningMessage(describeResult(result));
        }
        return;
      }
      await previewAndApplyFiles(this.context.previews, result);
    } catch (error) {
      if (error instanceof ServerUnavailableError) {
        this.context.server.showFailure(error);
      } else {
        void vscode.window.showErrorMessage(`Copy-as-Decode: ${errorText(error)}`);
      }
    } finally {
      this.running.delete(source);
      source.dispose();
    }
  }

  /** Cancel every edit in flight. */
  cancelAll(): void {
    for (const source of this.running) {
      source.cancel();
    }
  }

  dispose(): void {
    this.cancelAll();
  }

  /**
   * The document and range to edit: a code action's target, else the active editor's selection
   * (`wholeLineWhenEmpty`: the cursor's line for an empty selection; otherwise no range).
   */
  private async resolveTarget(
    target: unknown,
    wholeLineWhenEmpty: boolean,
  ): Promise<{ document: vscode.TextDocument; range?: Range } | undefined> {
    if (isTarget(target)) {
      const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(target.uri));
      const range = target.range;
      const empty = range === undefined || (range.start.line === range.end.line && range.start.character === range.end.character);
      return { document, range: range && (!empty || wholeLineWhenEmpty) ? selectionRange(range) : undefined };
    }
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined) {
      void vscode.window.showWarningMessage("Copy-as-Decode: open a file to edit first.");
      return undefined;
    }
    const { start, end } = editor.selection;
    const range: Range = {
      start: { line: start.line, character: start.character },
      end: { line: end.line, character: end.character },
    };
    if (editor.selection.isEmpty && !wholeLineWhenEmpty) {
      return { document: editor.document };
    }
    return { document: editor.document, range: selectionRange(range) };
  }

  /**
   * Send one edit with a cancellable progress notification that shows the server's progress,
   * then report how it ended.
   */
  private async run(document: vscode.TextDocument, request: EditRequest): Promise<void> {
    const { preview, snap } = this.context.settings();
    const argument = buildEditArgument({ ...request, snap, dryRun: preview });
    const source = new vscode.CancellationTokenSource();
    this.running.add(source);
    try {
      const result = await vscode.window.withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: request.program !== undefined ? "Copy-as-Decode: applying the program" : "Copy-as-Decode: editing",
          cancellable: true,
        },
        async (progress, token) => {
          const subscription = token.onCancellationRequested(() => source.cancel());
          try {
            return await this.context.server.applyEdit(argument, source.token, (message) => progress.report({ message }));
          } finally {
            subscription.dispose();
          }
        },
      );
      if (result === undefined || source.token.isCancellationRequested) {
        void vscode.window.showInformationMessage("Copy-as-Decode: the edit was cancelled; nothing was changed.");
        return;
      }
      if (preview && result.edits !== undefined) {
        await previewAndApply(this.context.previews, document, result);
        return;
      }
      const message = describeResult(result);
      if (result.reason === "document changed") {
        return; // the server has already said so (window/showMessage)
      }
      if (result.applied) {
        vscode.window.setStatusBarMessage(message, 5000);
      } else if (result.reason === "cancelled" || result.reason === "superseded") {
        void vscode.window.showInformationMessage(message);
      } else {
        void vscode.window.showWarningMessage(message);
      }
    } catch (error) {
      if (source.token.isCancellationRequested) {
        void vscode.window.showInformationMessage("Copy-as-Decode: the edit was cancelled; nothing was changed.");
      } else if (error instanceof ServerUnavailableError) {
        this.context.server.showFailure(error);
      } else {
        void vscode.window.showErrorMessage(`Copy-as-Decode: ${errorText(error)}`);
      }
    } finally {
      this.running.delete(source);
      source.dispose();
    }
  }
}
