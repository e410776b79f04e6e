/**
 * End to end: the extension's CadServer and commands, with the real `vscode-languageclient`
 * LanguageClient (on the fake `vscode` module), talking to a real `cad serve` over stdio.
 * Programs are given, so no model is loaded.
 *
 * The server is, in order: CAD_COMMAND (the `cad` executable or a Python interpreter),
 * CAD_PYTHON (a Python interpreter with copy-as-decode installed), the repository's
 * `.venv/bin/cad`, or `cad` on the PATH. Without any, the suite is skipped with a message.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { EditCommands } from "../src/commands";
import { buildEditArgument, selectionRange } from "../src/lib/editArgs";
import { InstructionHistory } from "../src/lib/history";
import { completeProgram } from "../src/lib/program";
import { findExecutable } from "../src/lib/serverCommand";
import { readSettings } from "../src/lib/settings";
import { applyTextEdits } from "../src/lib/textEdits";
import { previewAndApplyFiles } from "../src/multiFile";
import { PreviewDocuments } from "../src/preview";
import { CadServer, type StatusEvent } from "../src/server";
import { commands, fake, FakeOutputChannel, languages, Position, Range, Uri } from "./fakes/vscode";

const REPOSITORY = path.resolve(__dirname, "..", "..");

function isFile(candidate: string): boolean {
  try {
    return fs.statSync(candidate).isFile();
  } catch {
    return false;
  }
}

/** The `cad.serverCommand` value that starts the server under test, or undefined. */
function serverCommand(): string | undefined {
  const fromEnvironment = process.env.CAD_COMMAND?.trim() || process.env.CAD_PYTHON?.trim();
  if (fromEnvironment) {
    return fromEnvironment;
  }
  const venv = process.platform === "win32" ? path.join(".venv", "Scripts", "cad.exe") : path.join(".venv", "bin", "cad");
  const candidates = [path.join(REPOSITORY, venv), findExecutable("cad", process.env, isFile)];
  return candidates.find((candidate) => candidate !== undefined && isFile(candidate));
}

const COMMAND = serverCommand();
if (COMMAND === undefined) {
  console.warn(
    "SKIPPED the cad serve tests: no cad executable found. Set CAD_PYTHON (a Python with " +
      "copy-as-decode installed) or CAD_COMMAND (the cad executable), or install the package " +
      `into ${path.join(REPOSITORY, ".venv")}.`,
  );
}

const BEFORE = "def mean(values):\r\n    return sum(values) / len(values) + 1\r\n\r\n# 😀 done\r\n";
const AFTER = "def mean(values):\r\n    return sum(values) / len(values)\r\n\r\n# 😀 done\r\n";
const FIX_MEAN = '<copy lines="1-1"/>\n<gen>    return sum(values) / len(values)\r\n</gen>\n<copy lines="3-4"/>\n</program>';

/** The commands package.json contributes. */
function contributedCommands(): string[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf-8")) as {
    contributes: { commands: { command: string }[] };
  };
  return manifest.contributes.commands.map((entry) => entry.command);
}

/** The LSP code action provider the language client registered for the server. */
interface CodeActionProvider {
  provideCodeActions(document: unknown, range: Range, context: unknown, token: unknown): Promise<unknown[]>;
}

describe.skipIf(COMMAND === undefined)("cad serve through the extension's language client", () => {
  const output = new FakeOutputChannel("Copy-as-Decode");
  const statuses: StatusEvent[] = [];
  let server: CadServer;
  let ready: Promise<void>;

  beforeAll(() => {
    server = new CadServer(output, readSettings((key) => (key === "serverCommand" ? COMMAND : undefined)));
    ready = new Promise((resolve) => {
      server.onStatus((event) => {
        statuses.push(event);
        if (event.state === "ready") {
          resolve();
        }
      });
    });
    server.start();
  });

  afterAll(async () => {
    await server?.stop();
    server?.dispose();
  });

  it("starts the server and reports it ready", async () => {
    await ready;
    expect(statuses.map((event) => event.state).slice(0, 2)).toEqual(["starting", "ready"]);
    expect(fake.messages.filter((message) => message.severity === "error")).toEqual([]);
  });

  it("applies a program: the edit arrives as workspace/applyEdit with the expected text", async () => {
    const document = fake.open("file:///tmp/cad-extension-test/mean.py", BEFORE, "python", 7);
    const result = await server.applyEdit(buildEditArgument({ uri: document.uri.toString(), instruction: "drop + 1", program: FIX_MEAN }));
    expect(result).toMatchObject({ applied: true, program: FIX_MEAN });
    expect(fake.appliedEdits).toHaveLength(1);
    const [[uri, edits]] = fake.appliedEdits[0].entries();
    expect(uri.toString()).toBe(document.uri.toString());
    expect(edits.map((edit) => [edit.range.start.line, edit.newText])).toEqual([[1, ""]]);
    expect(document.getText()).toBe(AFTER);
    expect(document.version).toBe(8);
  });

  it("edits only the selected lines, with UTF-16 positions", async () => {
    const lines = Array.from({ length: 20 }, (_, i) => (i === 9 ? "# 😀 done\n" : `line ${i + 1}\n`));
    const document = fake.open("file:///tmp/cad-extension-test/lines.py", lines.join(""));
    const range = selectionRange({ start: { line: 9, character: 0 }, end: { line: 11, character: 0 } });
    const program = completeProgram('<gen># 😀 all done\n</gen>\n<copy lines="2-2"/>');
    const result = await server.applyEdit(buildEditArgument({ uri: document.uri.toString(), instruction: "", range, program }));
    expect(result?.applied).toBe(true);
    for (const edit of fake.appliedEdits[0].entries()[0][1]) {
      expect([edit.range.start.line, edit.range.end.line]).toEqual([9, 9]);
    }
    expect(document.getText()).toBe(lines.join("").replace("# 😀 done\n", "# 😀 all done\n"));
  });

  it("returns a dry run's edits without applying them, for the preview", async () => {
    const document = fake.open("file:///tmp/cad-extension-test/preview.py", BEFORE, "python", 3);
    const argument = buildEditArgument({ uri: document.uri.toString(), instruction: "x", program: FIX_MEAN, dryRun: true });
    const result = await server.applyEdit(argument);
    expect(result).toMatchObject({ applied: false, version: 3 });
    expect(fake.appliedEdits).toEqual([]);
    expect(applyTextEdits(document.getText(), result?.edits ?? [])).toBe(AFTER);
  });

  it("runs Apply Program… from the clipboard on the selection, with a progress notification", async () => {
    const document = fake.open("file:///tmp/cad-extension-test/command.py", "a = 1\nb = 2\nc = 3\n");
    fake.showEditor(document, new Position(1, 0), new Position(2, 0));
    fake.clipboard = '<gen>b = 20\n</gen>';
    fake.pickFrom = (items) => items.find((item) => item.label.includes("clipboard"));
    const editCommands = new EditCommands({
      server,
      history: new InstructionHistory({ get: () => undefined, update: () => Promise.resolve() }),
      previews: new PreviewDocuments(),
      settings: () => ({ preview: false, snap: true }),
    });
    await editCommands.applyProgram();
    expect(document.getText()).toBe("a = 1\nb = 20\nc = 3\n");
    expect(fake.progress.map((shown) => shown.options.title)).toEqual(["Copy-as-Decode: applying the program"]);
    expect(fake.messages.filter((message) => message.severity !== "information")).toEqual([]);
  });

  it("applies a multi-file program over several documents after its preview", async () => {
    const app = fake.open("file:///tmp/cad-extension-test/multi/app.py", "import os\n\ndef helper(x):\n    return x + 1\n", "python", 4);
    const util = fake.open("file:///tmp/cad-extension-test/multi/util.py", "X = 1\n");
    const program = completeProgram(
      '<edit file="1">\n<copy lines="1-1"/>\n<gen>from util import helper\n</gen>\n</edit>\n' +
        '<edit file="2">\n<copy lines="1-1"/>\n<copy file="1" lines="2-4"/>\n</edit>\n' +
        '<create path="helpers.py">\n<copy file="1" lines="3-4"/>\n</create>',
    );
    const result = await server.applyEdit({ uris: [app.uri.toString(), util.uri.toString()], program, dryRun: true });
    expect(result?.files?.map((file) => file.status)).toEqual(["modified", "modified", "created"]);
    expect(fake.appliedEdits).toEqual([]);
    let asked = 0;
    fake.answer = () => {
      asked += 1;
      return "Apply";
    };
    expect(await previewAndApplyFiles(new PreviewDocuments(), result!)).toBe(true);
    expect(asked).toBe(1);
    expect(app.getText()).toBe("import os\nfrom util import helper\n");
    expect(util.getText()).toBe("X = 1\n\ndef helper(x):\n    return x + 1\n");
    const created = fake.documents.find((document) => document.uri.toString() === "file:///tmp/cad-extension-test/multi/helpers.py");
    expect(created?.getText()).toBe("def helper(x):\n    return x + 1\n");
  });

  it("reports a bad program as an error and stays up", async () => {
    const document = fake.open("file:///tmp/cad-extension-test/errors.py", "x = 1\n");
    const uri = document.uri.toString();
    await expect(server.applyEdit(buildEditArgument({ uri, instruction: "", program: completeProgram('<copy lines="1-9"/>') }))).rejects.toThrow(
      /out of range/,
    );
    await expect(server.applyEdit(buildEditArgument({ uri: "file:///not/open.py", instruction: "", program: "</program>" }))).rejects.toThrow(
      /not open/,
    );
    const result = await server.applyEdit(buildEditArgument({ uri, instruction: "", program: completeProgram("<gen>x = 2\n</gen>") }));
    expect(result?.applied).toBe(true);
    expect(document.getText()).toBe("x = 2\n");
  });

  it("takes settings changes, the mode included", async () => {
    await server.updateSettings(
      readSettings((key) => ({ serverCommand: COMMAND, maxNewTokens: 64, device: "cpu", mode: "program" })[key]),
    );
    const document = fake.open("file:///tmp/cad-extension-test/settings.py", "y = 1\n");
    const range = selectionRange({ start: { line: 0, character: 0 }, end: { line: 0, character: 0 } });
    const program = completeProgram('<copy lines="1-1"/><gen>z = 2\n</gen>');
    const result = await server.applyEdit(buildEditArgument({ uri: document.uri.toString(), instruction: "", range, program }));
    expect(result?.applied).toBe(true);
    expect(document.getText()).toBe("y = 1\nz = 2\n");
  });

  it("offers code actions whose commands the extension contributes", async () => {
    const document = fake.open("file:///tmp/cad-extension-test/actions.py", BEFORE);
    const [provider] = (languages.providers.get("codeActions") ?? []) as CodeActionProvider[];
    expect(provider).toBeDefined();
    const range = new Range(new Position(0, 0), new Position(1, 0));
    const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose: () => undefined }) };
    const actions = (await provider.provideCodeActions(document, range, { diagnostics: [], triggerKind: 1 }, token)) as {
      command?: { command: string; arguments?: unknown[] };
    }[];
    const commands = actions.map((action) => action.command?.command ?? "");
    expect([...commands].sort()).toEqual(["cad.applyProgram", "cad.editSelection"]);
    expect(commands.every((command) => contributedCommands().includes(command))).toBe(true);
    for (const action of actions) {
      expect(action.command?.arguments).toEqual([{ uri: Uri.parse(document.uri.toString()).toString(), range: { start: { line: 0, character: 0 }, end: { line: 1, character: 0 } } }]);
    }
  });

  it("registers the server's command, which none of the extension's commands clashes with", async () => {
    const registered = await commands.getCommands();
    expect(registered).toContain("cad.applyEdit");
    expect(registered.filter((command) => contributedCommands().includes(command))).toEqual([]);
  });
});
