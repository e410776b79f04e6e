/**
 * Activation on the fake `vscode` module: the commands package.json contributes are the ones
 * registered, and a server that cannot start is explained in a message and the status bar.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import type * as vscode from "vscode";
import { afterEach, describe, expect, it } from "vitest";

import { activate, currentSettings, deactivate } from "../src/extension";
import { DEFAULTS, USER_ONLY_SETTINGS } from "../src/lib/settings";
import { commands, fake } from "./fakes/vscode";

interface Manifest {
  capabilities: {
    untrustedWorkspaces: { supported: boolean | "limited"; restrictedConfigurations?: string[] };
  };
  contributes: {
    commands: { command: string }[];
    keybindings: { command: string; key: string }[];
    configuration: { properties: Record<string, { default: unknown; scope?: string }> };
  };
}

const MANIFEST = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf-8")) as Manifest;
const MISSING = path.join(__dirname, "no-such-dir", "cad");

let subscriptions: { dispose(): unknown }[] = [];

/** Activate the extension as VS Code does, with `cad.*` settings. */
function activateWith(settings: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(settings)) {
    fake.settings.set(`cad.${key}`, value);
  }
  subscriptions = [];
  const context = {
    subscriptions,
    globalState: {
      get: (key: string) => fake.globalState.get(key),
      update: (key: string, value: unknown) => {
        fake.globalState.set(key, value);
        return Promise.resolve();
      },
    },
  };
  activate(context as unknown as vscode.ExtensionContext);
}

afterEach(async () => {
  await deactivate();
  for (const subscription of subscriptions) {
    subscription.dispose();
  }
});

describe("activate", () => {
  it("registers exactly the commands package.json contributes", async () => {
    activateWith({ serverCommand: MISSING });
    const registered = await commands.getCommands();
    expect([...registered].sort()).toEqual(MANIFEST.contributes.commands.map((entry) => entry.command).sort());
    expect(MANIFEST.contributes.keybindings.map((binding) => binding.command)).toContain("cad.editSelection");
  });

  it("explains a server that cannot start, with a fix, in a message and the status bar", async () => {
    const shown = fake.nextError();
    activateWith({ serverCommand: MISSING });
    const { message, items } = await shown;
    expect(message).toMatch(/cannot start the language server .*was not found.*pip install copy-as-decode/);
    expect(items).toEqual(["Open Settings", "Show Output", "Retry"]);
    const [item] = fake.statusBarItems;
    expect(item.visible).toBe(true);
    expect(item.text).toBe("$(debug-disconnect) cad");
    expect(item.command).toBe("cad.restartServer");
  });

  it("restarts the server when cad.serverCommand changes", async () => {
    const first = fake.nextError();
    activateWith({ serverCommand: MISSING });
    await first;
    const second = fake.nextError();
    fake.configure({ "cad.serverCommand": `${MISSING}2` });
    expect((await second).message).toContain(`${MISSING}2 serve`);
    expect(fake.outputChannels[0].lines).toContain("[cad] cad.serverCommand changed; restarting the server");
  });

  it("declares every setting the extension reads, with the defaults it uses", () => {
    const declared = MANIFEST.contributes.configuration.properties;
    for (const [key, value] of Object.entries(DEFAULTS)) {
      expect(declared[`cad.${key}`]?.default, `cad.${key}`).toEqual(value);
    }
  });
});

describe("what runs", () => {
  it("is never chosen by a workspace's settings", async () => {
    fake.workspaceSettings.set("cad.serverCommand", "/tmp/from-the-workspace/cad");
    const shown = fake.nextError();
    activateWith({ serverCommand: MISSING });
    const { message } = await shown;
    expect(message).toContain(`${MISSING} serve`);
    expect(message).not.toContain("from-the-workspace");
    expect(fake.outputChannels[0].lines.join("\n")).not.toContain("from-the-workspace");
  });

  it("is declared machine-scoped and restricted in untrusted workspaces", () => {
    const declared = MANIFEST.contributes.configuration.properties;
    const untrusted = MANIFEST.capabilities.untrustedWorkspaces;
    expect(untrusted.supported).toBe("limited");
    for (const key of ["serverCommand", "engine", "model", "adapter"]) {
      expect(USER_ONLY_SETTINGS, key).toContain(key);
      expect(declared[`cad.${key}`].scope, key).toBe("machine");
      expect(untrusted.restrictedConfigurations, key).toContain(`cad.${key}`);
    }
    for (const key of USER_ONLY_SETTINGS) {
      expect(declared[`cad.${key}`].scope, key).toBe("machine");
    }
  });

  it("never takes the engine, model or adapter from a workspace's settings", () => {
    fake.workspaceSettings.set("cad.engine", "http://collector.example:8000");
    fake.workspaceSettings.set("cad.model", "/tmp/from-the-workspace/model");
    fake.workspaceSettings.set("cad.adapter", "/tmp/from-the-workspace/adapter");
    fake.workspaceSettings.set("cad.maxNewTokens", 77);
    fake.settings.set("cad.model", "/me/model");
    const settings = currentSettings();
    expect(settings.engine).toBe(DEFAULTS.engine);
    expect(settings.model).toBe("/me/model");
    expect(settings.adapter).toBe(DEFAULTS.adapter);
    expect(settings.maxNewTokens).toBe(77);
  });

  it("runs a command inside the workspace only once the workspace is trusted", async () => {
    fake.trusted = false;
    const refused = fake.nextError();
    activateWith({ serverCommand: "${workspaceFolder}/.venv/bin/cad" });
    expect((await refused).message).toMatch(/runs a program from this workspace, which is not trusted/);
    const started = fake.nextError();
    fake.grantTrust();
    expect((await started).message).toMatch(/cannot start the language server .*\.venv\/bin\/cad"? serve.*was not found/);
  });
});
