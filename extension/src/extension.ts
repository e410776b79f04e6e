/**
 * Copy-as-Decode for VS Code: a thin client of the `cad serve` language server.
 */

import * as vscode from "vscode";

import { EditCommands } from "./commands";
import { InstructionHistory } from "./lib/history";
import {
  type CadSettings,
  readSettings,
  restartReason,
  serverSettingsChanged,
  USER_ONLY_SETTINGS,
  userValue,
} from "./lib/settings";
import { PREVIEW_SCHEME, PreviewDocuments } from "./preview";
import { CadServer } from "./server";
import { StatusBar } from "./statusBar";

let server: CadServer | undefined;

/** Every `cad.*` setting; the ones that pick a host, a command or a path only from the user's own settings. */
export function currentSettings(): CadSettings {
  const configuration = vscode.workspace.getConfiguration("cad");
  return readSettings((key) =>
    USER_ONLY_SETTINGS.includes(key) ? userValue(configuration.inspect(key)) : configuration.get(key),
  );
}

/** Start the server, register the commands, the status bar item and the preview documents. */
export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel("Copy-as-Decode");
  let settings = currentSettings();
  const cad = new CadServer(output, settings);
  server = cad;
  const statusBar = new StatusBar();
  const previews = new PreviewDocuments();
  const commands = new EditCommands({
    server: cad,
    history: new InstructionHistory(context.globalState),
    previews,
    settings: () => settings,
  });

  context.subscriptions.push(
    output,
    statusBar,
    previews,
    commands,
    cad,
    cad.onStatus((event) => statusBar.show(event.state, event.message)),
    vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, previews),
    ...commands.register(),
    vscode.commands.registerCommand("cad.restartServer", () => cad.restart()),
    vscode.workspace.onDidGrantWorkspaceTrust(() => cad.restart()),
    vscode.commands.registerCommand("cad.showOutput", () => output.show(true)),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration("cad")) {
        return;
      }
      const previous = settings;
      settings = currentSettings();
      const reason = restartReason(previous, settings);
      if (reason !== undefined) {
        output.appendLine(`[cad] ${reason}; restarting the server`);
        await cad.updateSettings(settings);
        await cad.restart();
      } else if (serverSettingsChanged(previous, settings)) {
        await cad.updateSettings(settings);
      }
    }),
  );
  cad.start();
}

/** Stop the server. */
export async function deactivate(): Promise<void> {
  const running = server;
  server = undefined;
  await running?.stop();
}
