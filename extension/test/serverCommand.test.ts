import assert from "node:assert/strict";
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
} from "../src/lib/serverCommand";

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
    assert.equal(describeLaunch(serverLaunch("python")), 'python -c "from server.cli import main; main()" serve');
  });
});
