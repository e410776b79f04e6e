/**
 * Turning the `cad.serverCommand` setting into a process to spawn, and explaining failures.
 */

import * as path from "path";

/** A process to spawn: the executable and its arguments. */
export interface Launch {
  command: string;
  args: string[];
}

/** Arguments that run `cad serve` through a Python interpreter with the package installed. */
export const PYTHON_SERVE_ARGS = ["-c", "from cad.server.cli import main; main()", "serve"];

/** What the user can do when the server does not start. */
export const INSTALL_HINT =
  "Install it with \"pip install copy-as-decode\", or set cad.serverCommand to the cad executable (or to a Python interpreter that has copy-as-decode installed).";

/** Context for expanding `~` and `${workspaceFolder}` in the setting. */
export interface ExpandContext {
  home?: string;
  workspaceFolder?: string;
}

/** The placeholder for the workspace folder in `cad.serverCommand`. */
export const WORKSPACE_FOLDER = "${workspaceFolder}";

/**
 * Why `cad.serverCommand` must not run in this window, or undefined when it may: a command
 * inside the workspace (`${workspaceFolder}`) runs only in a trusted workspace.
 */
export function untrustedLaunch(setting: string, trusted: boolean): string | undefined {
  if (trusted || !setting.includes(WORKSPACE_FOLDER)) {
    return undefined;
  }
  return `Copy-as-Decode: cad.serverCommand (${setting.trim()}) runs a program from this workspace, which is not trusted; trust the workspace to start the language server.`;
}

/** Expand a leading `~` and every `${workspaceFolder}` (left as is when there is none). */
export function expandPath(value: string, context: ExpandContext): string {
  let expanded = value;
  if (context.workspaceFolder !== undefined) {
    expanded = expanded.split(WORKSPACE_FOLDER).join(context.workspaceFolder);
  }
  if (context.home !== undefined && (expanded === "~" || /^~[\\/]/.test(expanded))) {
    expanded = context.home + expanded.slice(1);
  }
  return expanded;
}

/** Whether an executable path names a Python interpreter (`python`, `python3.11`, `python.exe`, …). */
export function isPython(command: string): boolean {
  const base = command.split(/[\\/]/).pop() ?? command;
  return /^python(\d+(\.\d+)*)?(w)?(\.exe)?$/i.test(base);
}

/**
 * The process for a `cad.serverCommand` value: `<cad> serve`, or `<python> -c … serve` when it
 * names a Python interpreter.
 */
export function serverLaunch(setting: string, context: ExpandContext = {}): Launch {
  const command = expandPath(setting.trim() || "cad", context);
  if (isPython(command)) {
    return { command, args: [...PYTHON_SERVE_ARGS] };
  }
  return { command, args: ["serve"] };
}

/**
 * Find `command` the way spawning it would: a path with a directory part is taken as is,
 * a bare name is looked up in `PATH` (with `PATHEXT` on Windows). Returns undefined when it
 * cannot be found.
 */
export function findExecutable(
  command: string,
  env: Record<string, string | undefined>,
  isFile: (candidate: string) => boolean,
  platform: string = process.platform,
): string | undefined {
  const windows = platform === "win32";
  const extensions = windows
    ? ["", ...(env.PATHEXT ?? ".EXE;.CMD;.BAT;.COM").split(";").filter((e) => e !== "")]
    : [""];
  const candidates = (base: string): string[] => extensions.map((ext) => base + ext);
  if (/[\\/]/.test(command)) {
    return candidates(command).find(isFile);
  }
  const directories = (env.PATH ?? env.Path ?? "").split(windows ? ";" : ":").filter((d) => d !== "");
  for (const directory of directories) {
    const found = candidates(path.join(directory, command)).find(isFile);
    if (found !== undefined) {
      return found;
    }
  }
  return undefined;
}

/** The command line of `launch`, quoted where needed, for messages. */
export function describeLaunch(launch: Launch): string {
  const quote = (part: string): string => (/^[\w@%+=:,./~-]+$/.test(part) ? part : JSON.stringify(part));
  return [launch.command, ...launch.args].map(quote).join(" ");
}

/** The message shown when the server cannot be started at all. */
export function startFailureMessage(launch: Launch, cause?: string): string {
  const what = `Copy-as-Decode: cannot start the language server (${describeLaunch(launch)})`;
  return `${what}${cause ? `: ${cause}` : ""}. ${INSTALL_HINT}`;
}

/** The message shown when the server keeps exiting and will not be restarted again. */
export function crashMessage(restarts: number): string {
  return `Copy-as-Decode: the language server stopped ${restarts} time${restarts === 1 ? "" : "s"} in a row and will not be restarted; see its output for the cause. ${INSTALL_HINT}`;
}
