/**
 * CadServer without a working server: what the user sees when `cad serve` cannot start.
 */

import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";

import { readSettings } from "../src/lib/settings";
import { CadServer, type StatusEvent } from "../src/server";
import { fake, FakeOutputChannel } from "./fakes/vscode";

const servers: CadServer[] = [];

/** A CadServer for `serverCommand`, with the status events it fires. */
function serverFor(serverCommand: string): { server: CadServer; statuses: StatusEvent[]; output: FakeOutputChannel } {
  const output = new FakeOutputChannel("Copy-as-Decode");
  const server = new CadServer(output, readSettings((key) => (key === "serverCommand" ? serverCommand : undefined)));
  const statuses: StatusEvent[] = [];
  server.onStatus((event) => statuses.push(event));
  servers.push(server);
  return { server, statuses, output };
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    await server.stop();
    server.dispose();
  }
});

describe("CadServer when the server cannot start", () => {
  it("says that the executable is missing and how to install it, with buttons to fix it", async () => {
    const missing = path.join(__dirname, "no-such-dir", "cad");
    const { server, statuses } = serverFor(missing);
    const shown = fake.nextError();
    server.start();
    const { message, items } = await shown;
    expect(message).toContain(`cannot start the language server (${missing} serve)`);
    expect(message).toContain("was not found");
    expect(message).toContain("pip install copy-as-decode");
    expect(items).toEqual(["Open Settings", "Show Output", "Retry"]);
    expect(statuses.map((event) => event.state)).toEqual(["starting", "stopped"]);
  });

  it("opens the setting when asked", async () => {
    const { server } = serverFor(path.join(__dirname, "no-such-dir", "cad"));
    const opened = new Promise<unknown[]>((resolve) => {
      fake.answer = () => "Open Settings";
      fake.onExecute = (command, args) => command === "workbench.action.openSettings" && resolve(args);
    });
    server.start();
    expect(await opened).toEqual(["cad.serverCommand"]);
  });

  it("fails an edit with the same message", async () => {
    const { server } = serverFor(path.join(__dirname, "no-such-dir", "cad"));
    await expect(server.applyEdit({ uri: "file:///a.py", instruction: "x" })).rejects.toThrow(/cannot start the language server/);
  });
});
