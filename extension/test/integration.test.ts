/**
 * End to end against the real `cad serve`: the extension's argument building, settings and edit
 * application, with vscode-languageserver-protocol standing in for VS Code. Programs are given,
 * so no model is loaded.
 *
 * Set CAD_COMMAND (the `cad` executable, or a Python interpreter) or CAD_PYTHON (a Python
 * interpreter with copy-as-decode installed); without either the suite is skipped.
 */

import assert from "node:assert/strict";
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import {
  ApplyWorkspaceEditRequest,
  type ApplyWorkspaceEditParams,
  CodeActionRequest,
  createProtocolConnection,
  DidChangeConfigurationNotification,
  DidChangeTextDocumentNotification,
  DidOpenTextDocumentNotification,
  ExecuteCommandRequest,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  type ProtocolConnection,
  ResponseError,
  ShowMessageNotification,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  TextDocumentEdit,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
} from "vscode-languageserver-protocol/node";

import { APPLY_EDIT, buildEditArgument, type EditArgument, type EditResult, isEditResult, selectionRange } from "../src/lib/editArgs";
import { completeProgram } from "../src/lib/program";
import { type Launch, PYTHON_SERVE_ARGS, serverLaunch } from "../src/lib/serverCommand";
import { configurationChange, readSettings, toServerSettings } from "../src/lib/settings";
import { parseStatus, type ServerState } from "../src/lib/status";
import { applyTextEdits } from "../src/lib/textEdits";

function launchFromEnvironment(): Launch | undefined {
  const command = process.env.CAD_COMMAND?.trim();
  if (command) {
    return serverLaunch(command);
  }
  const python = process.env.CAD_PYTHON?.trim();
  if (python) {
    return { command: python, args: [...PYTHON_SERVE_ARGS] };
  }
  return undefined;
}

const LAUNCH = launchFromEnvironment();
const SKIP = LAUNCH === undefined ? "set CAD_PYTHON (a Python with copy-as-decode installed) or CAD_COMMAND (the cad executable) to run the server tests" : false;

const BEFORE = "def mean(values):\r\n    return sum(values) / len(values) + 1\r\n\r\n# 😀 done\r\n";
const AFTER = "def mean(values):\r\n    return sum(values) / len(values)\r\n\r\n# 😀 done\r\n";
const FIX_MEAN = '<copy lines="1-1"/>\n<gen>    return sum(values) / len(values)\r\n</gen>\n<copy lines="3-4"/>\n</program>';

/** Open documents as the editor holds them: text and version. */
class Editor {
  readonly documents = new Map<string, { text: string; version: number }>();
  readonly applied: ApplyWorkspaceEditParams[] = [];
  readonly statuses: ServerState[] = [];
  readonly messages: string[] = [];
  readonly progress: unknown[] = [];

  constructor(private readonly connection: ProtocolConnection) {
    connection.onRequest(ApplyWorkspaceEditRequest.type, (params) => this.applyEdit(params));
    connection.onRequest(WorkDoneProgressCreateRequest.type, (params) => {
      connection.onProgress(WorkDoneProgress.type, params.token, (value) => this.progress.push(value));
      return null;
    });
    connection.onNotification(ShowMessageNotification.type, (params) => this.messages.push(params.message));
    connection.onNotification("cad/status", (params: unknown) => this.statuses.push(parseStatus(params).state));
  }

  async open(uri: string, text: string, version = 1): Promise<void> {
    this.documents.set(uri, { text, version });
    await this.connection.sendNotification(DidOpenTextDocumentNotification.type, {
      textDocument: { uri, languageId: "python", version, text },
    });
  }

  text(uri: string): string {
    return this.documents.get(uri)?.text ?? "";
  }

  /** Replace a document's text locally and tell the server, as VS Code does after an edit. */
  async change(uri: string, text: string): Promise<void> {
    const document = this.documents.get(uri);
    assert.ok(document, `${uri} is open`);
    document.text = text;
    document.version += 1;
    await this.connection.sendNotification(DidChangeTextDocumentNotification.type, {
      textDocument: { uri, version: document.version },
      contentChanges: [{ text }],
    });
  }

  /** `cad.applyEdit` with the extension's argument; its result checked for shape. */
  async edit(argument: EditArgument): Promise<EditResult> {
    const result: unknown = await this.connection.sendRequest(ExecuteCommandRequest.type, {
      command: APPLY_EDIT,
      arguments: [argument],
    });
    assert.ok(isEditResult(result), `an edit result: ${JSON.stringify(result)}`);
    return result;
  }

  private applyEdit(params: ApplyWorkspaceEditParams): { applied: boolean; failureReason?: string } {
    this.applied.push(params);
    for (const change of params.edit.documentChanges ?? []) {
      if (!TextDocumentEdit.is(change)) {
        return { applied: false, failureReason: "only text document edits are expected" };
      }
      const document = this.documents.get(change.textDocument.uri);
      if (document === undefined || document.version !== change.textDocument.version) {
        return { applied: false, failureReason: "version mismatch" };
      }
      // Mirror VS Code: apply, bump the version, report the change back.
      void this.change(change.textDocument.uri, applyTextEdits(document.text, change.edits));
    }
    return { applied: true };
  }
}

/** The extension's package.json (tests run from out/test/). */
function readManifest(): { contributes: { commands: { command: string }[] } } {
  return JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf-8")) as {
    contributes: { commands: { command: string }[] };
  };
}

async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe("cad serve, driven as the extension drives it", { skip: SKIP, timeout: 120_000 }, () => {
  let server: ChildProcessWithoutNullStreams;
  let connection: ProtocolConnection;
  let editor: Editor;
  let stderr = "";
  let capabilities: Record<string, unknown> = {};

  before(async () => {
    assert.ok(LAUNCH);
    server = spawn(LAUNCH.command, LAUNCH.args, { stdio: "pipe", env: { ...process.env, PYTHONUNBUFFERED: "1" } });
    server.stderr.on("data", (data: Buffer) => {
      stderr += data.toString();
    });
    connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
    editor = new Editor(connection);
    connection.listen();
    const result = await within(
      connection.sendRequest(InitializeRequest.type, {
        processId: process.pid,
        rootUri: null,
        capabilities: {
          window: { workDoneProgress: true },
          workspace: { applyEdit: true, workspaceEdit: { documentChanges: true } },
        },
        initializationOptions: toServerSettings(readSettings(() => undefined)),
      }),
      60_000,
      `initialize (${LAUNCH.command}); server stderr: ${stderr}`,
    );
    capabilities = result.capabilities as Record<string, unknown>;
    await connection.sendNotification(InitializedNotification.type, {});
  });

  after(async () => {
    if (connection === undefined) {
      return;
    }
    const exited = new Promise<number | null>((resolve) => server.once("exit", (code) => resolve(code)));
    await within(connection.sendRequest(ShutdownRequest.type), 10_000, "shutdown").catch(() => undefined);
    await connection.sendNotification(ExitNotification.type).catch(() => undefined);
    const code = await within(exited, 10_000, "exit").catch(() => {
      server.kill();
      return null;
    });
    connection.dispose();
    assert.equal(code, 0, `the server exits cleanly; stderr: ${stderr}`);
  });

  it("offers cad.applyEdit, and no command the extension registers itself", () => {
    const provider = capabilities.executeCommandProvider as { commands: string[] } | undefined;
    assert.ok(provider?.commands.includes(APPLY_EDIT));
    // The language client registers the server's commands in VS Code; a clash would stop it.
    const contributed = readManifest().contributes.commands.map((c) => c.command);
    assert.deepEqual((provider?.commands ?? []).filter((command) => contributed.includes(command)), []);
  });

  it("applies a program as a minimal versioned edit", async () => {
    const uri = "file:///tmp/cad-extension-test/mean.py";
    await editor.open(uri, BEFORE, 7);
    const argument = buildEditArgument({ uri, instruction: "drop + 1", program: FIX_MEAN });
    const count = editor.applied.length;
    const result = await within(editor.edit(argument), 30_000, "cad.applyEdit");
    assert.equal(result.applied, true, JSON.stringify(result));
    assert.equal(result.program, FIX_MEAN);
    const params = editor.applied[count];
    assert.ok(params, "workspace/applyEdit arrived");
    const [change] = params.edit.documentChanges ?? [];
    assert.ok(TextDocumentEdit.is(change));
    assert.equal(change.textDocument.version, 7);
    assert.equal(change.edits.length, 1);
    assert.equal(change.edits[0].range.start.line, 1);
    assert.equal(change.edits[0].newText, "");
    assert.equal(editor.text(uri), AFTER);
    assert.ok(editor.statuses.includes("editing") && editor.statuses.includes("ready"), editor.statuses.join(","));
  });

  it("edits only the selected lines, with UTF-16 positions", async () => {
    const uri = "file:///tmp/cad-extension-test/lines.py";
    const lines = Array.from({ length: 20 }, (_, i) => (i === 9 ? "# 😀 done\n" : `line ${i + 1}\n`));
    const before = lines.join("");
    await editor.open(uri, before);
    // Lines 10 and 11 selected (0-based 9 up to the start of 11): the program numbers them 1-2.
    const range = selectionRange({ start: { line: 9, character: 0 }, end: { line: 11, character: 0 } });
    const program = completeProgram('<gen># 😀 all done\n</gen>\n<copy lines="2-2"/>');
    const count = editor.applied.length;
    const result = await within(editor.edit(buildEditArgument({ uri, instruction: "", range, program })), 30_000, "cad.applyEdit");
    assert.equal(result.applied, true, JSON.stringify(result));
    const [change] = editor.applied[count].edit.documentChanges ?? [];
    assert.ok(TextDocumentEdit.is(change));
    for (const edit of change.edits) {
      assert.equal(edit.range.start.line, 9);
      assert.equal(edit.range.end.line, 9);
    }
    assert.equal(editor.text(uri), before.replace("# 😀 done\n", "# 😀 all done\n"));
  });

  it("edits the cursor's line for an empty selection", async () => {
    const uri = "file:///tmp/cad-extension-test/cursor.py";
    await editor.open(uri, "a = 1\nb = 2\nc = 3\n");
    const range = selectionRange({ start: { line: 1, character: 3 }, end: { line: 1, character: 3 } });
    const program = completeProgram("<gen>b = 20\n</gen>");
    const result = await within(editor.edit(buildEditArgument({ uri, instruction: "", range, program })), 30_000, "cad.applyEdit");
    assert.equal(result.applied, true);
    assert.equal(editor.text(uri), "a = 1\nb = 20\nc = 3\n");
  });

  it("returns a dry run's edits without applying them, for the preview", async () => {
    const uri = "file:///tmp/cad-extension-test/preview.py";
    await editor.open(uri, BEFORE, 3);
    const count = editor.applied.length;
    const result = await within(
      editor.edit(buildEditArgument({ uri, instruction: "drop + 1", program: FIX_MEAN, dryRun: true })),
      30_000,
      "cad.applyEdit (dry run)",
    );
    assert.equal(result.applied, false);
    assert.equal(result.version, 3);
    assert.ok(result.edits && result.edits.length > 0);
    assert.equal(editor.applied.length, count, "nothing was applied");
    assert.equal(editor.text(uri), BEFORE);
    // Accepting the preview applies the same edits.
    const previewed = applyTextEdits(editor.text(uri), result.edits);
    assert.equal(previewed, AFTER);
    await editor.change(uri, previewed);
    const again = await within(
      editor.edit(buildEditArgument({ uri, instruction: "x", program: "</program>", dryRun: true })),
      30_000,
      "cad.applyEdit (dry run after the change)",
    );
    assert.equal(again.version, 4);
    assert.equal(applyTextEdits(editor.text(uri), again.edits ?? []), "");
  });

  it("reports bad programs and unknown documents as errors, and stays up", async () => {
    const uri = "file:///tmp/cad-extension-test/errors.py";
    await editor.open(uri, "x = 1\n");
    await assert.rejects(
      editor.edit(buildEditArgument({ uri, instruction: "", program: completeProgram('<copy lines="1-9"/>') })),
      (error: unknown) => error instanceof ResponseError && /out of range/.test(error.message),
    );
    await assert.rejects(
      editor.edit(buildEditArgument({ uri: "file:///not/open.py", instruction: "", program: "</program>" })),
      (error: unknown) => error instanceof ResponseError && /not open/.test(error.message),
    );
    await assert.rejects(
      editor.edit(buildEditArgument({ uri, instruction: "   " })),
      (error: unknown) => error instanceof ResponseError && /instruction/.test(error.message),
    );
    const result = await within(
      editor.edit(buildEditArgument({ uri, instruction: "", program: completeProgram("<gen>x = 2\n</gen>") })),
      30_000,
      "cad.applyEdit after errors",
    );
    assert.equal(result.applied, true);
    assert.equal(editor.text(uri), "x = 2\n");
  });

  it("takes settings changes", async () => {
    const settings = readSettings((key) => ({ maxNewTokens: 64, device: "cpu", adapter: "" })[key]);
    await connection.sendNotification(DidChangeConfigurationNotification.type, configurationChange(settings));
    const uri = "file:///tmp/cad-extension-test/settings.py";
    await editor.open(uri, "y = 1\n");
    const result = await within(
      editor.edit(buildEditArgument({ uri, instruction: "", program: completeProgram('<copy lines="1-1"/><gen>z = 2\n</gen>') })),
      30_000,
      "cad.applyEdit after didChangeConfiguration",
    );
    assert.equal(result.applied, true);
    assert.equal(editor.text(uri), "y = 1\nz = 2\n");
  });

  it("offers code actions whose commands the extension contributes", async () => {
    const uri = "file:///tmp/cad-extension-test/mean.py";
    const range = { start: { line: 0, character: 0 }, end: { line: 1, character: 0 } };
    const actions = (await within(
      connection.sendRequest(CodeActionRequest.type, { textDocument: { uri }, range, context: { diagnostics: [] } }),
      10_000,
      "codeAction",
    )) as { command?: { command: string; arguments?: unknown[] } }[];
    const contributed = new Set(readManifest().contributes.commands.map((c) => c.command));
    const commands = actions.map((action) => action.command?.command);
    assert.deepEqual(commands.sort(), ["cad.applyProgram", "cad.editSelection"]);
    for (const action of actions) {
      assert.ok(contributed.has(action.command?.command ?? ""), `package.json contributes ${action.command?.command}`);
      assert.deepEqual(action.command?.arguments, [{ uri, range }]);
    }
  });
});
