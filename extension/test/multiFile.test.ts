/**
 * Apply Program to Files… on the fake `vscode` module, against a scripted server: which
 * documents are sent in which order, the diff of every file (created and deleted
 * ones included), and nothing applied when a document changed or the user discards the edit.
 */

import type * as vscode from "vscode";
import { beforeEach, describe, expect, it } from "vitest";

import { EditCommands } from "../src/commands";
import type { EditArgument, EditResult, MultiEditArgument } from "../src/lib/editArgs";
import { InstructionHistory } from "../src/lib/history";
import { looksLikeProgram } from "../src/lib/program";
import { describeFiles, readWorkspaceEdit, staleDocument } from "../src/lib/workspaceEdit";
import { PreviewDocuments } from "../src/preview";
import type { EditServer } from "../src/server";
import { fake, type FakeTextDocument, Position, Uri } from "./fakes/vscode";

const APP = "file:///work/pkg/app.py";
const UTIL = "file:///work/pkg/util.py";
const OLD = "file:///work/pkg/old.py";
const CTX = "file:///work/pkg/ctx.py";
const NEW = "file:///work/pkg/helpers.py";
const PROGRAM = '<edit file="2">\n<copy file="1" lines="1-1"/>\n</edit>\n<create path="pkg/helpers.py">\n<copy file="3" lines="1-1"/>\n</create>\n<delete file="1"/>\n</program>';

/** The server's dry run of PROGRAM over old.py, util.py and ctx.py (context), at versions 1. */
function dryRun(versions: { old: number; util: number } = { old: 1, util: 1 }): EditResult {
  const start = { line: 0, character: 0 };
  return {
    applied: false,
    program: PROGRAM,
    stats: { mode: "program", ops: 5, files: 3 },
    files: [
      { uri: UTIL, status: "modified" },
      { uri: NEW, status: "created" },
      { uri: OLD, status: "deleted" },
    ],
    edit: {
      documentChanges: [
        { textDocument: { uri: CTX, version: 1 }, edits: [] },
        { textDocument: { uri: UTIL, version: versions.util }, edits: [{ range: { start, end: { line: 0, character: 5 } }, newText: "OLD = 0" }] },
        { textDocument: { uri: OLD, version: versions.old }, edits: [] },
        { kind: "create", uri: NEW, options: { overwrite: false, ignoreIfExists: false } },
        { textDocument: { uri: NEW, version: null }, edits: [{ range: { start, end: start }, newText: "CTX = 3\n" }] },
        { kind: "delete", uri: OLD, options: { recursive: false } },
      ],
    },
  };
}

class ScriptedServer implements EditServer {
  readonly arguments: (EditArgument | MultiEditArgument)[] = [];
  answer: () => Promise<EditResult | undefined> = () => Promise.resolve(dryRun());

  applyEdit(argument: EditArgument | MultiEditArgument, _token?: vscode.CancellationToken): Promise<EditResult | undefined> {
    this.arguments.push(argument);
    return this.answer();
  }

  showFailure(): void {}
}

let server: ScriptedServer;
let commands: EditCommands;
let previews: PreviewDocuments;
let documents: Record<string, FakeTextDocument>;

beforeEach(() => {
  server = new ScriptedServer();
  commands = new EditCommands({
    server,
    history: new InstructionHistory({ get: () => undefined, update: () => Promise.resolve() }),
    previews: (previews = new PreviewDocuments()),
    settings: () => ({ preview: false, snap: false }),
  });
  documents = {
    util: fake.open(UTIL, "X = 1\n"),
    ctx: fake.open(CTX, "CTX = 3\n"),
    old: fake.open(OLD, "OLD = 0\n"),
    app: fake.open(APP, "import os\n"),
  };
  fake.workspaceFolder = Uri.parse("file:///work");
  fake.showEditor(documents.old, new Position(0, 0));
  fake.clipboard = PROGRAM;
  fake.pickFrom = (items) => items.find((item) => item.label.includes("clipboard"));
  // files: old.py (active, listed first) and util.py; context: ctx.py
  const picks = [["pkg/old.py", "pkg/util.py"], ["pkg/ctx.py"]];
  fake.pickMany = (items) => {
    const wanted = picks.shift() ?? [];
    return items.filter((item) => wanted.includes(item.label));
  };
});

/** The documents' texts by URI. */
function texts(): Record<string, string> {
  return Object.fromEntries(fake.documents.map((document) => [document.uri.toString(), document.getText()]));
}

describe("Apply Program to Files…", () => {
  it("numbers the active document first, then the others by path, and sends context after them", async () => {
    const offered: string[][] = [];
    const picks = [["pkg/util.py", "pkg/old.py"], ["pkg/ctx.py"]];
    fake.pickMany = (items) => {
      offered.push(items.map((item) => `${item.label}${item.picked ? " (picked)" : ""}`));
      const wanted = picks.shift() ?? [];
      return items.filter((item) => wanted.includes(item.label));
    };
    await commands.applyProgramToFiles();
    expect(offered).toEqual([
      ["pkg/old.py (picked)", "pkg/app.py", "pkg/ctx.py", "pkg/util.py"],
      ["pkg/app.py", "pkg/ctx.py"],
    ]);
    expect(server.arguments).toEqual([{ uris: [OLD, UTIL], context: [CTX], program: PROGRAM, root: "file:///work", dryRun: true }]);
  });

  it("opens a diff of every changed and created file and applies the whole edit when accepted", async () => {
    const asked: string[] = [];
    fake.answer = (shown) => {
      asked.push(shown.message);
      return "Apply";
    };
    await commands.applyProgramToFiles();
    expect(asked).toEqual(["Copy-as-Decode: apply this edit (1 file changed, 1 created, 1 deleted, deleting pkg/old.py)?"]);
    const diffs = fake.executed.filter((run) => run.command === "vscode.diff");
    expect(diffs.map((run) => [(run.args[0] as Uri).toString().startsWith("cad-preview:") ? "(new)" : (run.args[0] as Uri).toString(), run.args[2]])).toEqual([
      [UTIL, "pkg/util.py ↔ Copy-as-Decode edit"],
      ["(new)", "pkg/helpers.py (new) ↔ Copy-as-Decode edit"],
    ]);
    expect(previews.provideTextDocumentContent(diffs[0].args[1] as Uri)).toBe(""); // closed again
    const [edit] = fake.appliedEdits;
    expect(edit.operations.map((operation) => [operation.kind, operation.uri.toString()])).toEqual([
      ["edit", UTIL],
      ["create", NEW],
      ["delete", OLD],
    ]);
    expect(edit.operations.every((operation) => operation.metadata === undefined)).toBe(true);
    expect(texts()).toEqual({ [UTIL]: "OLD = 0\n", [CTX]: "CTX = 3\n", [APP]: "import os\n", [NEW]: "CTX = 3\n" });
    expect(fake.statusMessages).toEqual(["Copy-as-Decode: program applied (1 file changed, 1 created, 1 deleted)."]);
  });

  it("shows each file's new text in its diff", async () => {
    const shown: string[] = [];
    fake.onExecute = (command, args) => {
      if (command === "vscode.diff") {
        shown.push(previews.provideTextDocumentContent(args[1] as Uri));
      }
    };
    await commands.applyProgramToFiles();
    expect(shown).toEqual(["OLD = 0\n", "CTX = 3\n"]);
  });

  it("applies nothing when the user discards the edit", async () => {
    fake.answer = () => "Discard";
    const before = texts();
    await commands.applyProgramToFiles();
    expect(texts()).toEqual(before);
    expect(fake.appliedEdits).toEqual([]);
    expect(fake.messages.map((message) => message.message).at(-1)).toBe("Copy-as-Decode: the edit was not applied.");
  });

  it("applies nothing when a document changes while the diffs are shown", async () => {
    fake.answer = () => {
      documents.util.setText("X = 2\n");
      return "Apply";
    };
    await commands.applyProgramToFiles();
    expect(fake.appliedEdits).toEqual([]);
    expect(fake.messages.map((message) => message.message).at(-1)).toBe(
      "Copy-as-Decode: pkg/util.py changed while the edit was being made; nothing was applied. Run the edit again.",
    );
  });

  it("applies nothing when any document changed since the edit was made, a deleted one included", async () => {
    server.answer = () => {
      documents.old.setText("OLD = 1\n"); // the user types while the server works
      return Promise.resolve(dryRun());
    };
    await commands.applyProgramToFiles();
    expect(fake.appliedEdits).toEqual([]);
    expect(fake.messages.map((message) => message.message)).toEqual([
      "Copy-as-Decode: pkg/old.py changed while the edit was being made; nothing was applied. Run the edit again.",
    ]);
  });

  it("applies nothing when a file to create exists", async () => {
    fake.files.add(NEW);
    await commands.applyProgramToFiles();
    expect(fake.appliedEdits).toEqual([]);
    expect(fake.messages[0].message).toMatch(/pkg\/helpers.py already exists; nothing was applied/);
  });

  it("shows the server's refusal and stops when nothing is picked", async () => {
    server.answer = () => Promise.reject(new Error("cad.applyEdit: <edit file=\"3\">: file 3 is a 'context' document"));
    await commands.applyProgramToFiles();
    expect(fake.messages.map((message) => [message.severity, message.message])).toEqual([
      ["error", "Copy-as-Decode: cad.applyEdit: <edit file=\"3\">: file 3 is a 'context' document"],
    ]);
    fake.pickMany = () => undefined;
    await commands.applyProgramToFiles();
    expect(server.arguments).toHaveLength(1);
  });

  it("says so when the server saw a document change", async () => {
    server.answer = () => Promise.resolve({ ...dryRun(), edit: undefined, reason: "document changed", changed: UTIL });
    await commands.applyProgramToFiles();
    expect(fake.appliedEdits).toEqual([]);
    expect(fake.messages).toEqual([]); // the server has said so itself (window/showMessage)
  });
});

describe("Edit Files with Instruction…", () => {
  it("sends the instruction for the picked documents and previews what the model wrote", async () => {
    fake.onQuickPick = (picker) => picker.type("move OLD to util.py");
    fake.answer = () => "Apply";
    await commands.editFiles();
    expect(server.arguments).toEqual([
      { uris: [OLD, UTIL], context: [CTX], instruction: "move OLD to util.py", root: "file:///work", dryRun: true },
    ]);
    expect(texts()).toEqual({ [UTIL]: "OLD = 0\n", [CTX]: "CTX = 3\n", [APP]: "import os\n", [NEW]: "CTX = 3\n" });
  });

  it("sends nothing when the instruction is dismissed", async () => {
    fake.onQuickPick = (picker) => picker.hide();
    await commands.editFiles();
    expect(server.arguments).toEqual([]);
  });

  it("applies nothing when the edit is cancelled", async () => {
    fake.onQuickPick = (picker) => picker.type("move OLD to util.py");
    server.answer = () => Promise.resolve(undefined);
    await commands.editFiles();
    expect(fake.appliedEdits).toEqual([]);
    expect(fake.messages.map((message) => message.message)).toEqual([
      "Copy-as-Decode: the edit was cancelled; nothing was changed.",
    ]);
  });
});

describe("reading the server's WorkspaceEdit", () => {
  it("folds a created file's text into its creation and keeps version checks", () => {
    const operations = readWorkspaceEdit(dryRun().edit);
    expect(operations.map((operation) => operation.kind)).toEqual(["edit", "edit", "edit", "create", "delete"]);
    expect(operations[3]).toEqual({ kind: "create", uri: NEW, text: "CTX = 3\n" });
    expect(staleDocument(operations, () => 1)).toBeUndefined();
    expect(staleDocument(operations, (uri) => (uri === CTX ? 2 : 1))).toBe(CTX);
    expect(describeFiles(dryRun().files ?? [])).toBe("1 file changed, 1 created, 1 deleted");
  });

  it("refuses what is not a WorkspaceEdit of documentChanges", () => {
    expect(() => readWorkspaceEdit({ changes: {} })).toThrow(/no documentChanges/);
    expect(() => readWorkspaceEdit({ documentChanges: [{ kind: "rename" }] })).toThrow(/not a text edit/);
    expect(() => readWorkspaceEdit({ documentChanges: [{ textDocument: { uri: APP }, edits: [] }] })).toThrow(/no version/);
  });

  it("recognises multi-file programs", () => {
    for (const text of ['<edit file="1">', '<create path="a.py">', '<delete file="2"/>', '<copy file="2" lines="1-1"/>']) {
      expect(looksLikeProgram(text)).toBe(true);
    }
    expect(looksLikeProgram("<editor>")).toBe(false);
  });
});
