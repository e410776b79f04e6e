/**
 * The edit commands on the fake `vscode` module, against a scripted server: what is asked, what
 * is sent, what is shown, and what reaches the document.
 */

import type * as vscode from "vscode";
import { beforeEach, describe, expect, it } from "vitest";

import { EditCommands } from "../src/commands";
import type { EditArgument, EditResult } from "../src/lib/editArgs";
import { InstructionHistory } from "../src/lib/history";
import { PreviewDocuments } from "../src/preview";
import { type EditServer, ServerUnavailableError } from "../src/server";
import { fake, type FakeQuickPick, type FakeTextDocument, Position } from "./fakes/vscode";

/** One `applyEdit` call the commands made. */
interface Call {
  argument: EditArgument;
  token: vscode.CancellationToken | undefined;
  onProgress: ((message: string) => void) | undefined;
}

/** A server whose answers the test scripts. */
class ScriptedServer implements EditServer {
  readonly calls: Call[] = [];
  readonly failures: unknown[] = [];
  answer: (call: Call) => Promise<EditResult | undefined> = () => Promise.resolve({ applied: true, program: "", stats: { ops: 2 } });

  applyEdit(
    argument: EditArgument,
    token?: vscode.CancellationToken,
    onProgress?: (message: string) => void,
  ): Promise<EditResult | undefined> {
    const call = { argument, token, onProgress };
    this.calls.push(call);
    return this.answer(call);
  }

  showFailure(error: unknown): void {
    this.failures.push(error);
  }
}

const URI = "file:///work/mean.py";
const TEXT = "def mean(values):\n    return sum(values) / len(values) + 1\n\nprint(mean([1]))\n";

let server: ScriptedServer;
let settings: { preview: boolean; snap: boolean };
let history: InstructionHistory;
let commands: EditCommands;
let document: FakeTextDocument;

/** Answer the next instruction prompt by typing `text` (undefined: dismiss it). */
function typeInstruction(text: string | undefined): void {
  fake.onQuickPick = (picker) => (text === undefined ? picker.hide() : picker.type(text));
}

beforeEach(() => {
  server = new ScriptedServer();
  settings = { preview: false, snap: false };
  history = new InstructionHistory({
    get: <T>(key: string) => fake.globalState.get(key) as T | undefined,
    update: (key, value) => {
      fake.globalState.set(key, value);
      return Promise.resolve();
    },
  });
  commands = new EditCommands({ server, history, previews: new PreviewDocuments(), settings: () => settings });
  document = fake.open(URI, TEXT);
});

describe("Edit Selection…", () => {
  it("sends the instruction with the selected lines and remembers it", async () => {
    fake.showEditor(document, new Position(0, 4), new Position(1, 10));
    typeInstruction("  drop the + 1 ");
    await commands.editSelection();
    expect(server.calls.map((call) => call.argument)).toEqual([
      {
        uri: URI,
        instruction: "drop the + 1",
        range: { start: { line: 0, character: 4 }, end: { line: 1, character: 10 } },
      },
    ]);
    expect(history.entries()).toEqual(["drop the + 1"]);
    expect(fake.statusMessages).toEqual(["Copy-as-Decode: edit applied (2 ops)."]);
  });

  it("edits the cursor's line when nothing is selected, and asks to snap it when cad.snap is on", async () => {
    settings.snap = true;
    fake.showEditor(document, new Position(1, 7));
    typeInstruction("rename values");
    await commands.editSelection();
    expect(server.calls[0].argument).toEqual({
      uri: URI,
      instruction: "rename values",
      range: { start: { line: 1, character: 0 }, end: { line: 2, character: 0 } },
      snap: true,
    });
  });

  it("offers recent instructions, most recent first, and takes a picked one", async () => {
    await history.add("older");
    await history.add("newer");
    fake.showEditor(document, new Position(0, 0), new Position(2, 0));
    let offered: string[] = [];
    fake.onQuickPick = (picker: FakeQuickPick<{ label: string }>) => {
      offered = picker.items.map((item) => item.label);
      picker.pick("older");
    };
    await commands.editSelection();
    expect(offered).toEqual(["newer", "older"]);
    expect(server.calls[0].argument.instruction).toBe("older");
    expect(history.entries()).toEqual(["older", "newer"]);
  });

  it("sends nothing when the prompt is dismissed", async () => {
    fake.showEditor(document, new Position(0, 0));
    typeInstruction(undefined);
    await commands.editSelection();
    expect(server.calls).toEqual([]);
  });

  it("edits a code action's range in its document", async () => {
    typeInstruction("add a docstring");
    await commands.editSelection({ uri: URI, range: { start: { line: 0, character: 0 }, end: { line: 2, character: 0 } } });
    expect(server.calls[0].argument).toMatchObject({
      uri: URI,
      range: { start: { line: 0, character: 0 }, end: { line: 2, character: 0 } },
    });
  });

  it("asks for an open file first", async () => {
    await commands.editSelection();
    expect(fake.messages).toEqual([{ severity: "warning", message: "Copy-as-Decode: open a file to edit first.", items: [] }]);
    expect(server.calls).toEqual([]);
  });
});

describe("Edit File…", () => {
  it("sends the whole document, never snapped", async () => {
    settings.snap = true;
    fake.showEditor(document, new Position(1, 2), new Position(1, 5));
    typeInstruction("add type hints");
    await commands.editFile();
    expect(server.calls[0].argument).toEqual({ uri: URI, instruction: "add type hints" });
  });
});

describe("Apply Program…", () => {
  it("applies a program from the clipboard to the selection, without snapping", async () => {
    settings.snap = true;
    fake.showEditor(document, new Position(1, 0), new Position(2, 0));
    fake.clipboard = '<gen>    return sum(values) / len(values)\n</gen>';
    let offered: string[] = [];
    fake.pickFrom = (items) => {
      offered = items.map((item) => item.label);
      return items[0];
    };
    await commands.applyProgram();
    expect(offered[0]).toMatch(/clipboard/);
    expect(server.calls[0].argument).toEqual({
      uri: URI,
      instruction: "",
      range: { start: { line: 1, character: 0 }, end: { line: 2, character: 0 } },
      program: "<gen>    return sum(values) / len(values)\n</gen>\n</program>",
    });
    expect(fake.progress[0].options.title).toBe("Copy-as-Decode: applying the program");
  });

  it("takes a typed program for the whole file when nothing is selected", async () => {
    fake.showEditor(document, new Position(0, 0));
    fake.pickFrom = (items) => items.find((item) => item.label.includes("Type"));
    fake.inputBox = () => '<copy lines="1-2"/>';
    await commands.applyProgram();
    expect(server.calls[0].argument).toEqual({ uri: URI, instruction: "", program: '<copy lines="1-2"/>\n</program>' });
  });
});

describe("progress and cancellation", () => {
  it("shows the server's progress in a cancellable notification", async () => {
    fake.showEditor(document, new Position(0, 0));
    typeInstruction("x");
    server.answer = (call) => {
      call.onProgress?.("3 ops, 2 lines copied, 1 generated");
      return Promise.resolve({ applied: true, program: "", stats: {} });
    };
    await commands.editSelection();
    expect(fake.progress).toHaveLength(1);
    expect(fake.progress[0].options).toMatchObject({ title: "Copy-as-Decode: editing", cancellable: true });
    expect(fake.progress[0].reports).toEqual([{ message: "3 ops, 2 lines copied, 1 generated" }]);
  });

  it("passes the notification's Cancel to the server and says nothing was changed", async () => {
    fake.showEditor(document, new Position(0, 0));
    typeInstruction("x");
    server.answer = (call) =>
      new Promise((resolve) => {
        call.token?.onCancellationRequested(() => resolve(undefined));
        fake.progress[0].cancel();
      });
    await commands.editSelection();
    expect(server.calls[0].token?.isCancellationRequested).toBe(true);
    expect(fake.messages).toEqual([
      { severity: "information", message: "Copy-as-Decode: the edit was cancelled; nothing was changed.", items: [] },
    ]);
    expect(document.getText()).toBe(TEXT);
  });

  it("cancels every edit in flight on Cancel Running Edits", async () => {
    fake.showEditor(document, new Position(0, 0));
    typeInstruction("x");
    server.answer = (call) =>
      new Promise((resolve) => {
        call.token?.onCancellationRequested(() => resolve({ applied: false, program: "", stats: {}, reason: "cancelled" }));
        commands.cancelAll();
      });
    await commands.editSelection();
    expect(server.calls[0].token?.isCancellationRequested).toBe(true);
    expect(fake.messages.map((message) => message.message)).toEqual(["Copy-as-Decode: the edit was cancelled; nothing was changed."]);
  });
});

describe("results and errors", () => {
  it("warns when the server did not apply the edit, with its reason", async () => {
    fake.showEditor(document, new Position(0, 0));
    typeInstruction("x");
    server.answer = () => Promise.resolve({ applied: false, program: "", stats: {}, reason: "rejected by the editor" });
    await commands.editSelection();
    expect(fake.messages).toEqual([
      { severity: "warning", message: "Copy-as-Decode: the edit was not applied (rejected by the editor).", items: [] },
    ]);
  });

  it("shows the server's error", async () => {
    fake.showEditor(document, new Position(0, 0));
    typeInstruction("x");
    server.answer = () => Promise.reject(new Error("program line 1: copy out of range"));
    await commands.editSelection();
    expect(fake.messages).toEqual([{ severity: "error", message: "Copy-as-Decode: program line 1: copy out of range", items: [] }]);
  });

  it("lets the server explain why it is unavailable", async () => {
    fake.showEditor(document, new Position(0, 0));
    typeInstruction("x");
    const unavailable = new ServerUnavailableError("cannot start the language server", false);
    server.answer = () => Promise.reject(unavailable);
    await commands.editSelection();
    expect(server.failures).toEqual([unavailable]);
    expect(fake.messages).toEqual([]);
  });
});

describe("preview (cad.preview)", () => {
  const fixMean = { range: { start: { line: 1, character: 36 }, end: { line: 1, character: 40 } }, newText: "" };

  beforeEach(() => {
    settings.preview = true;
    fake.showEditor(document, new Position(1, 0), new Position(2, 0));
    typeInstruction("drop the + 1");
    server.answer = (call) =>
      Promise.resolve({ applied: false, program: "", stats: {}, edits: call.argument.dryRun ? [fixMean] : [], version: document.version });
  });

  it("asks for a dry run, shows a diff, and applies the edits when accepted", async () => {
    let question: string | undefined;
    fake.answer = (shown) => {
      question = shown.message;
      return "Apply";
    };
    await commands.editSelection();
    expect(server.calls[0].argument.dryRun).toBe(true);
    expect(fake.executed.map((run) => run.command)).toEqual(["vscode.diff"]);
    expect(question).toBe("Copy-as-Decode: apply this edit to mean.py?");
    expect(document.getText()).toBe(TEXT.replace(" + 1", ""));
  });

  it("leaves the document alone when the edit is discarded", async () => {
    fake.answer = () => "Discard";
    await commands.editSelection();
    expect(fake.appliedEdits).toEqual([]);
    expect(document.getText()).toBe(TEXT);
  });

  it("applies nothing when the document changed while the diff was open", async () => {
    fake.answer = () => {
      document.setText(`${TEXT}# typed meanwhile\n`);
      return "Apply";
    };
    await commands.editSelection();
    expect(fake.appliedEdits).toEqual([]);
    expect(fake.messages.map((message) => message.message)).toContain(
      "Copy-as-Decode: the document changed since the preview; nothing was applied. Run the edit again.",
    );
  });
});
