/**
 * The `cad serve` process and its language client: start, stop, restart with back-off after a
 * crash, settings, `cad/status` notifications and the `cad.applyEdit` request.
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
  TransportKind,
} from "vscode-languageclient/node";

import { RestartPolicy } from "./lib/backoff";
import { APPLY_EDIT, type EditArgument, type EditResult, isEditResult } from "./lib/editArgs";
import {
  crashMessage,
  findExecutable,
  type Launch,
  serverLaunch,
  startFailureMessage,
} from "./lib/serverCommand";
import { type CadSettings, configurationChange, toServerSettings } from "./lib/settings";
import { parseStatus, type ServerState, STATUS_NOTIFICATION } from "./lib/status";

/** A server state change, for the status bar. */
export interface StatusEvent {
  state: ServerState;
  message: string;
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

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Owns the server process; one client at a time, replaced on restart. */
export class CadServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<LanguageClient> | undefined;
  private readonly policy = new RestartPolicy();
  private readonly statusEmitter = new vscode.EventEmitter<StatusEvent>();
  private generation = 0;
  private disposed = false;
  private gaveUp = false;

  /** Fires on every state change of the server. */
  readonly onStatus = this.statusEmitter.event;

  constructor(
    private readonly output: vscode.OutputChannel,
    private settings: CadSettings,
  ) {}

  /** The running client, starting the server first when needed. */
  async ready(): Promise<LanguageClient> {
    if (this.client !== undefined && this.client.state === State.Running) {
      return this.client;
    }
    if (this.starting === undefined) {
      this.gaveUp = false;
      this.starting = this.launch().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  /** Start the server in the background; failures are shown to the user. */
  start(): void {
    this.ready().catch((error: unknown) => this.showFailure(error));
  }

  /** Stop the server and start a fresh one with a new restart budget. */
  async restart(): Promise<void> {
    this.policy.reset();
    await this.stop();
    this.start();
  }

  /** Stop the server (no restart follows). */
  async stop(): Promise<void> {
    this.generation += 1;
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) {
      try {
        await client.dispose(5000);
      } catch (error) {
        this.output.appendLine(`[cad] stopping the server: ${String(error)}`);
      }
    }
    this.emit("stopped", "");
  }

  /** Take new settings: tell a running server about them (restarts are the caller's call). */
  async updateSettings(settings: CadSettings): Promise<void> {
    this.settings = settings;
    const client = this.client;
    if (client !== undefined && client.state === State.Running) {
      await client.sendNotification(DidChangeConfigurationNotification.type, configurationChange(settings));
    }
  }

  /**
   * Run `cad.applyEdit`. Resolves to undefined when `token` cancelled the request; rejects with
   * the server's error message otherwise.
   */
  async applyEdit(argument: EditArgument, token?: vscode.CancellationToken): Promise<EditResult | undefined> {
    const client = await this.ready();
    const result: unknown = await client.sendRequest(
      ExecuteCommandRequest.type,
      { command: APPLY_EDIT, arguments: [argument] },
      token,
    );
    if (token?.isCancellationRequested && result == null) {
      return undefined;
    }
    if (!isEditResult(result)) {
      throw new Error(`unexpected answer from the server: ${JSON.stringify(result)}`);
    }
    return result;
  }

  dispose(): void {
    this.disposed = true;
    void this.stop();
    this.statusEmitter.dispose();
  }

  private launchSpec(): Launch {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    return serverLaunch(this.settings.serverCommand, { home: os.homedir(), workspaceFolder: folder });
  }

  private async launch(): Promise<LanguageClient> {
    if (this.disposed) {
      throw new ServerUnavailableError("Copy-as-Decode is shutting down.", false);
    }
    await this.stop();
    const generation = this.generation;
    const launch = this.launchSpec();
    if (findExecutable(launch.command, process.env, isFile) === undefined) {
      this.emit("stopped", "not installed");
      throw new ServerUnavailableError(startFailureMessage(launch, `${launch.command} was not found`), false);
    }
    this.emit("starting", "");
    this.output.appendLine(`[cad] starting: ${launch.command} ${launch.args.join(" ")}`);
    const client = this.createClient(launch, generation);
    this.client = client;
    try {
      await client.start();
    } catch (error) {
      if (this.client === client) {
        this.client = undefined;
      }
      await client.dispose(2000).catch(() => undefined);
      this.emit("stopped", "failed to start");
      throw new ServerUnavailableError(startFailureMessage(launch, errorText(error)), true);
    }
    this.policy.started(Date.now());
    this.emit("ready", "");
    return client;
  }

  private createClient(launch: Launch, generation: number): LanguageClient {
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      transport: TransportKind.stdio,
      options: { env: { ...process.env, PYTHONUNBUFFERED: "1" } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
      initializationOptions: () => toServerSettings(this.settings),
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationFailedHandler: () => false,
      errorHandler: {
        error: (_error, _message, count) => ({
          action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown,
          handled: true,
        }),
        closed: () => {
          this.onExit(generation);
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
    };
    const client = new QuietLanguageClient("cad", "Copy-as-Decode", serverOptions, clientOptions);
    client.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
      const { state, message } = parseStatus(params);
      this.emit(state, message);
    });
    return client;
  }

  /** The server of `generation` exited on its own: restart it after a delay, or give up. */
  private onExit(generation: number): void {
    if (generation !== this.generation || this.disposed || this.starting !== undefined) {
      return;
    }
    this.client = undefined;
    this.scheduleRestart();
  }

  /** Restart after the policy's delay; a failed restart schedules the next, until it gives up. */
  private scheduleRestart(): void {
    const decision = this.policy.exited(Date.now());
    if (!decision.restart) {
      this.emit("stopped", "crashed");
      if (!this.gaveUp) {
        this.gaveUp = true;
        void this.offerOutput(crashMessage(decision.attempts));
      }
      return;
    }
    const seconds = Math.round(decision.delayMs / 100) / 10;
    const generation = this.generation;
    this.output.appendLine(`[cad] the server stopped; restart ${decision.attempt} in ${seconds} s`);
    this.emit("stopped", `restarting in ${seconds} s`);
    void sleep(decision.delayMs).then(() => {
      if (generation !== this.generation || this.disposed || this.client !== undefined || this.starting !== undefined) {
        return;
      }
      this.ready().catch((error: unknown) => {
        this.output.appendLine(`[cad] restart failed: ${errorText(error)}`);
        const retryable = !(error instanceof ServerUnavailableError) || error.retryable;
        // launch() stopped the previous client once; anything more means someone else took over.
        if (generation + 1 === this.generation && !this.disposed && retryable) {
          this.scheduleRestart();
        } else if (!retryable) {
          this.showFailure(error);
        }
      });
    });
  }

  private emit(state: ServerState, message: string): void {
    if (!this.disposed) {
      this.statusEmitter.fire({ state, message });
    }
  }

  /** Show why the server is unavailable, with buttons to fix it. */
  showFailure(error: unknown): void {
    void this.offerOutput(errorText(error));
  }

  private async offerOutput(message: string): Promise<void> {
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
  if (error instanceof Error) {
    return error.message;
  }
  return String(error);
}
