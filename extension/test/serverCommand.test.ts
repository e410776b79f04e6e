import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "vitest";

import {
  crashMessage,
  describeLaunch,
  expandPath,
  findExecutable,
  INSTALL_HINT,
  isPython,
  PYTHON_SERVE_ARGS,
  serverLaunch,
  startFailureMessage,
  untrustedLaunch,
} from "../src/lib/serverCommand";
import { userValue } from "../src/lib/settings";

/** A Python with copy-as-decode installed: CAD_PYTHON, the one beside CAD_COMMAND, or the repository's. */
function installedPython(): string | undefined {
  const beside = process.env.CAD_COMMAND ? path.join(path.dirname(process.env.CAD_COMMAND), "python") : undefined;
  const candidates = [process.env.CAD_PYTHON, beside, path.resolve(__dirname, "..", "..", ".venv", "bin", "python")];
  return candidates.find((candidate) => candidate !== undefined && candidate !== "" && fs.existsSync(candidate));
}

describe("serverLaunch", () => {
  it("runs `cad serve` by default", () => {
    assert.deepEqual(serverLaunch("cad"), { command: "cad", args: ["serve"] });
    assert.deepEqual(serverLaunch("  "), { command: "cad", args: ["serve"] });
  });
  it("runs the CLI module through a Python interpreter", () => {
    assert.deepEqual(serverLaunch("/venv/bin/python3.11"), { command: "/venv/bin/python3.11", args: PYTHON_SERVE_ARGS });
  });
  it("expands ~ and ${workspaceFolder}", () => {
    const context = { home: "/home/u", workspaceFolder: "/ws" };
    assert.equal(serverLaunch("${workspaceFolder}/.venv/bin/cad", context).command, "/ws/.venv/bin/cad");
    assert.equal(expandPath("~/bin/cad", context), "/home/u/bin/cad");
    assert.equal(expandPath("~user/cad", context), "~user/cad");
  });
});

describe("the Python launch", () => {
  const python = installedPython();
  it.skipIf(python === undefined)("runs the installed package's server", () => {
    const [flag, code] = PYTHON_SERVE_ARGS;
    const done = spawnSync(python as string, [flag, code, "serve", "--help"], { encoding: "utf-8" });
    assert.equal(done.status, 0, done.stderr);
    assert.match(done.stdout, /Usage: .* serve/);
  });
});

describe("who chooses what runs", () => {
  it("takes the user's value, else the default, never the workspace's", () => {
    assert.equal(userValue({ defaultValue: "cad", globalValue: "/me/cad" }), "/me/cad");
    const workspace = { defaultValue: "cad", workspaceValue: "/ws/evil" } as { defaultValue: string };
    assert.equal(userValue(workspace), "cad");
  });
  it("runs a command inside the workspace only when it is trusted", () => {
    assert.match(untrustedLaunch("${workspaceFolder}/.venv/bin/cad", false) ?? "", /not trusted/);
    assert.equal(untrustedLaunch("${workspaceFolder}/.venv/bin/cad", true), undefined);
    assert.equal(untrustedLaunch("/opt/cad", false), undefined);
  });
});

describe("isPython", () => {
  for (const name of ["python", "python3", "python3.12", "/usr/bin/python3", "C:\\Py\\python.exe", "pythonw.exe"]) {
    it(`knows ${name}`, () => assert.equal(isPython(name), true));
  }
  for (const name of ["cad", "/venv/bin/cad", "ipython", "python-cad"]) {
    it(`is not fooled by ${name}`, () => assert.equal(isPython(name), false));
  }
});

describe("findExecutable", () => {
  const files = new Set(["/usr/bin/cad", "/opt/py/bin/python3", "C:\\tools\\cad.EXE"]);
  const isFile = (candidate: string) => files.has(candidate);
  it("looks bare names up in PATH", () => {
    assert.equal(findExecutable("cad", { PATH: "/bin:/usr/bin" }, isFile, "linux"), "/usr/bin/cad");
    assert.equal(findExecutable("nope", { PATH: "/bin:/usr/bin" }, isFile, "linux"), undefined);
  });
  it("takes paths as they are", () => {
    assert.equal(findExecutable("/opt/py/bin/python3", {}, isFile, "linux"), "/opt/py/bin/python3");
    assert.equal(findExecutable("/opt/py/bin/python", {}, isFile, "linux"), undefined);
  });
  it("tries PATHEXT on Windows", () => {
    assert.equal(findExecutable("C:\\tools\\cad", { PATHEXT: ".COM;.EXE" }, isFile, "win32"), "C:\\tools\\cad.EXE");
  });
});

describe("messages", () => {
  it("say how to install the server", () => {
    const message = startFailureMessage(serverLaunch("cad"), "cad was not found");
    assert.match(message, /cad serve/);
    assert.match(message, /cad was not found/);
    assert.ok(message.endsWith(INSTALL_HINT));
    assert.match(INSTALL_HINT, /pip install copy-as-decode/);
    assert.match(INSTALL_HINT, /cad\.serverCommand/);
    assert.match(crashMessage(5), /stopped 5 times/);
  });
  it("quote arguments with spaces", () => {
    assert.equal(describeLaunch(serverLaunch("python")), 'python -c "from cad.server.cli import main; main()" serve');
  });
});
