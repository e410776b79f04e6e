/**
 * The `cad serve` process and its language client: start, stop, restart with back-off after a
 * crash (see {@link Supervisor}), settings, `cad/status` notifications, `cad.applyEdit` and the
 * server's progress for each edit.
 */

import * as fs from "fs";
import * as os from "os";
import * as vscode from "vscode";
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
  State,
  type WorkDoneProgressBegin,
  WorkDoneProgressCancelNotification,
  type WorkDoneProgressEnd,
  type WorkDoneProgressReport,
} from "vscode-languageclient/node";

import { APPLY_EDIT, type EditArgument, type EditResult, isEditResult, type MultiEditArgument } from "./lib/editArgs";
import { type ProgressToken, ProgressRouter } from "./lib/progress";
import { findExecutable, type Launch, serverLaunch, startFailureMessage, untrustedLaunch } from "./lib/serverCommand";
import { type CadSettings, configurationChange, toServerSettings } from "./lib/settings";
import { parseStatus, type ServerState, STATUS_NOTIFICATION } from "./lib/status";
import { Supervisor } from "./lib/supervisor";

/** A server state change, for the status bar. */
export interface StatusEvent {
  state: ServerState;
  message: string;
}

/** What the edit commands need from the server. */
export interface EditServer {
  /**
   * Run `cad.applyEdit`. Resolves to undefined when `token` cancelled the request; `onProgress`
   * receives the server's progress messages.
   */
  applyEdit(
    argument: EditArgument | MultiEditArgument,
    token?: vscode.CancellationToken,
    onProgress?: (message: string) => void,
  ): Promise<EditResult | undefined>;
  /** Show why the server is unavailable, with buttons to fix it. */
  showFailure(error: unknown): void;
}

/** Raised when the server cannot run; the message says how to fix it. */
export class ServerUnavailableError extends Error {
  constructor(
    message: string,
    /** False when trying again cannot help (the command does not exist). */
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** A language client whose failures are logged but never popped up; the extension explains them. */
class QuietLanguageClient extends LanguageClient {
  override error(message: string, data?: unknown, _showNotification?: boolean | "force"): void {
    super.error(message, data, false);
  }
}

function isFile(candidate: string): boolean {
  try {
    return fs.statSync(candidate).isFile();
  } catch {
    return false;
  }
}

/** Owns the server process through a supervisor; one language client per process. */
export class CadServer implements EditServer, vscode.Disposable {
  private readonly supervisor: Supervisor<LanguageClient>;
  private readonly progress = new ProgressRouter();
  private readonly statusEmitter = new vscode.EventEmitter<StatusEvent>();
  private disposed = false;

  /** Fires on every state change of the server. */
  readonly onStatus = this.statusEmitter.event;

  constructor(
    private readonly output: vscode.OutputChannel,
    private settings: CadSettings,
  ) {
    this.supervisor = new Supervisor<LanguageClient>({
      launch: () => this.launch(),
      stop: (client) => client.dispose(5000),
      retryable: (error) => !(error instanceof ServerUnavailableError) || error.retryable,
      state: (state, message) => this.emit(state, message),
      gaveUp: (message) => void this.offerFix(message),
      failed: (error) => this.showFailure(error),
      log: (line) => this.output.appendLine(`[cad] ${line}`),
      now: () => Date.now(),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    });
  }

  /** Start the server in the background; failures are shown to the user. */
  start(): void {
    this.supervisor.ready().catch((error: unknown) => this.showFailure(error));
  }

  /** Stop the server and start a fresh one with a new restart budget. */
  async restart(): Promise<void> {
    await this.supervisor.restart().catch((error: unknown) => this.showFailure(error));
  }

  /** Stop the server (no restart follows). */
  stop(): Promise<void> {
    return this.supervisor.stop();
  }

  /** Take new settings: tell a running server about them (restarts are the caller's call). */
  async updateSettings(settings: CadSettings): Promise<void> {
    this.settings = settings;
    const client = this.supervisor.server;
    if (client !== undefined && client.state === State.Running) {
      await client.sendNotification(DidChangeConfigurationNotification.type, configurationChange(settings));
    }
  }

  /**
   * Run `cad.applyEdit`, starting the server first when needed. Resolves to undefined when
   * `token` cancelled the request; rejects with the server's error message otherwise.
   * Cancelling cancels the server's progress token once the server has begun progress for the
   * edit, and the request itself before that.
   */
  async applyEdit(
    argument: EditArgument | MultiEditArgument,
    token?: vscode.CancellationToken,
    onProgress?: (message: string) => void,
  ): Promise<EditResult | undefined> {
    const client = await this.supervisor.ready();
    const progress = this.progress.open((message) => onProgress?.(message));
    const request = new vscode.CancellationTokenSource();
    const cancelled = token?.onCancellationRequested(() => {
      const serverToken = progress.token;
      if (serverToken !== undefined) {
        void client.sendNotification(WorkDoneProgressCancelNotification.type, { token: serverToken });
      } else {
        request.cancel();
      }
    });
    let result: unknown;
    try {
      result = await client
        .sendRequest(ExecuteCommandRequest.type, { command: APPLY_EDIT, arguments: [argument] }, request.token)
        .finally(() => progress.close());
    } finally {
      cancelled?.dispose();
      request.dispose();
    }
    if (result == null) {
      if (token?.isCancellationRequested) {
        return undefined;
      }
      // The client answers null when the connection closed before the server answered.
      throw new Error("the language server stopped before answering; nothing was applied (see Show Server Output)");
    }
    if (!isEditResult(result)) {
      throw new Error(`unexpected answer from the server: ${JSON.stringify(result)}`);
    }
    return result;
  }

  /** Show why the server is unavailable, with buttons to fix it. */
  showFailure(error: unknown): void {
    void this.offerFix(errorText(error));
  }

  dispose(): void {
    this.disposed = true;
    void this.supervisor.dispose();
    this.statusEmitter.dispose();
  }

  private launchSpec(): Launch {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    return serverLaunch(this.settings.serverCommand, { home: os.homedir(), workspaceFolder: folder });
  }

  /** Spawn `cad serve` and wait for it to initialize. */
  private async launch(): Promise<LanguageClient> {
    const refusal = untrustedLaunch(this.settings.serverCommand, vscode.workspace.isTrusted);
    if (refusal !== undefined) {
      throw new ServerUnavailableError(refusal, false);
    }
    const launch = this.launchSpec();
    if (findExecutable(launch.command, process.env, isFile) === undefined) {
      throw new ServerUnavailableError(startFailureMessage(launch, `${launch.command} was not found`), false);
    }
    this.output.appendLine(`[cad] starting: ${launch.command} ${launch.args.join(" ")}`);
    const client = this.createClient(launch);
    try {
      await client.start();
      // start() also resolves when the process exited before it answered `initialize`.
      if (client.state !== State.Running) {
        throw new Error("the server exited while starting (see Show Server Output)");
      }
    } catch (error) {
      await client.dispose(2000).catch(() => undefined);
      throw new ServerUnavailableError(startFailureMessage(launch, errorText(error)), true);
    }
    return client;
  }

  private createClient(launch: Launch): LanguageClient {
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      // No transport: stdio all the same, without the `--stdio` flag `cad serve` does not take.
      options: { env: { ...process.env, PYTHONUNBUFFERED: "1" } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
      initializationOptions: () => toServerSettings(this.settings),
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationFailedHandler: () => false,
      middleware: {
        handleWorkDoneProgress: (progressToken, params, next) => {
          if (!this.routeProgress(progressToken, params)) {
            next(progressToken, params);
          }
        },
      },
      errorHandler: {
        error: (_error, _message, count) => ({
          action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown,
          handled: true,
        }),
        closed: () => {
          // The supervisor decides about restarts; it ignores clients it is stopping itself.
          this.supervisor.exited(client);
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
    };
    const client: LanguageClient = new QuietLanguageClient("cad", "Copy-as-Decode", serverOptions, clientOptions);
    client.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
      const { state, message } = parseStatus(params);
      this.emit(state, message);
    });
    return client;
  }

  /**
   * Give the server's progress to the edit it belongs to, which shows it in its notification;
   * false leaves it to the language client. The client always sees `end`, to clean up.
   */
  private routeProgress(
    token: ProgressToken,
    params: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd,
  ): boolean {
    switch (params.kind) {
      case "begin":
        return this.progress.begin(token, params.message);
      case "report":
        return this.progress.report(token, params.message);
      case "end":
        this.progress.end(token);
        return false;
    }
  }

  private emit(state: ServerState, message: string): void {
    if (!this.disposed) {
      this.statusEmitter.fire({ state, message });
    }
  }

  private async offerFix(message: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(message, "Open Settings", "Show Output", "Retry");
    if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "cad.serverCommand");
    } else if (choice === "Show Output") {
      this.output.show(true);
    } else if (choice === "Retry") {
      await this.restart();
    }
  }
}

/** The message of an error-like value. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
