/**
 * The status bar item: loading / ready / editing / error, as the server reports it.
 */

import * as vscode from "vscode";

import { type ServerState, statusView } from "./lib/status";

/** Shows the server state; clicking runs the state's command (edit, cancel, output, restart). */
export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("cad.status", vscode.StatusBarAlignment.Right, 100);

  constructor() {
    this.item.name = "Copy-as-Decode";
    this.show("starting");
    this.item.show();
  }

  /** Show `state` with the server's `message`. */
  show(state: ServerState, message = ""): void {
    const view = statusView(state, message);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.command = view.command;
    this.item.backgroundColor =
      view.severity === "normal" ? undefined : new vscode.ThemeColor(`statusBarItem.${view.severity}Background`);
  }

  dispose(): void {
    this.item.dispose();
  }
}
