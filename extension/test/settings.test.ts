import assert from "node:assert/strict";
import { describe, it } from "vitest";

import {
  type CadSettings,
  configurationChange,
  DEFAULTS,
  readSettings,
  restartReason,
  serverMode,
  serverSettingsChanged,
  toServerSettings,
} from "../src/lib/settings";

function reader(values: Record<string, unknown>) {
  return (key: string): unknown => values[key];
}

const base: CadSettings = readSettings(reader({}));

describe("readSettings", () => {
  it("falls back to the defaults", () => {
    assert.deepEqual(base, { ...DEFAULTS });
  });
  it("takes valid values and trims text", () => {
    const settings = readSettings(
      reader({
        serverCommand: " /venv/bin/python ",
        model: "/models/q",
        device: "cuda:1",
        dtype: "bfloat16",
        adapter: " /a ",
        maxNewTokens: 512.7,
        draftBudget: 16.5,
        mode: "rewrite",
        snap: true,
        preview: true,
        engine: " http://gpu:8000 ",
        syntax: "python",
      }),
    );
    assert.deepEqual(settings, {
      serverCommand: "/venv/bin/python",
      model: "/models/q",
      device: "cuda:1",
      dtype: "bfloat16",
      adapter: "/a",
      maxNewTokens: 512,
      draftBudget: 16,
      mode: "rewrite",
      snap: true,
      preview: true,
      engine: "http://gpu:8000",
      syntax: "python",
    });
  });
  it("rejects malformed values", () => {
    const settings = readSettings(
      reader({ model: "  ", maxNewTokens: 0, preview: "yes", adapter: 3, mode: "fast", snap: 1, syntax: "java", draftBudget: -1 }),
    );
    assert.equal(settings.draftBudget, null);
    assert.equal(settings.syntax, "auto");
    assert.equal(settings.model, DEFAULTS.model);
    assert.equal(settings.mode, "auto");
    assert.equal(settings.snap, false);
    assert.equal(settings.maxNewTokens, DEFAULTS.maxNewTokens);
    assert.equal(settings.preview, false);
    assert.equal(settings.adapter, "");
  });
});

describe("toServerSettings", () => {
  it("sends what the server knows, without extension-only settings", () => {
    assert.deepEqual(toServerSettings(base), {
      model: DEFAULTS.model,
      device: "auto",
      dtype: "auto",
      maxNewTokens: 2048,
      draftBudget: null,
      mode: "rewrite",
      engine: "",
      syntax: "auto",
    });
    assert.equal(toServerSettings({ ...base, draftBudget: 0 }).draftBudget, 0);
  });
  it("resolves mode auto: program with an adapter, rewrite without", () => {
    assert.equal(serverMode({ mode: "auto", adapter: "" }), "rewrite");
    assert.equal(serverMode({ mode: "auto", adapter: "/lora" }), "program");
    assert.equal(toServerSettings({ ...base, adapter: "/lora" }).mode, "program");
  });
  it("sends an explicit mode as it is, adapter or not", () => {
    assert.equal(toServerSettings({ ...base, mode: "program" }).mode, "program");
    assert.equal(toServerSettings({ ...base, mode: "rewrite", adapter: "/lora" }).mode, "rewrite");
  });
  it("sends an adapter only when one is set", () => {
    assert.equal(toServerSettings({ ...base, adapter: "/lora" }).adapter, "/lora");
    assert.equal("adapter" in toServerSettings(base), false);
  });
  it("wraps them under cad for didChangeConfiguration", () => {
    assert.deepEqual(configurationChange({ ...base, model: "m" }).settings.cad.model, "m");
  });
});

describe("changes", () => {
  it("restarts for another server command or a cleared adapter", () => {
    assert.match(restartReason(base, { ...base, serverCommand: "python3" }) ?? "", /serverCommand/);
    assert.match(restartReason({ ...base, adapter: "/a" }, base) ?? "", /adapter/);
    assert.equal(restartReason(base, { ...base, adapter: "/a" }), undefined);
    assert.equal(restartReason(base, { ...base, model: "other" }), undefined);
  });
  it("tells the server only about settings it uses", () => {
    assert.equal(serverSettingsChanged(base, { ...base, preview: true }), false);
    assert.equal(serverSettingsChanged(base, { ...base, snap: true }), false);
    assert.equal(serverSettingsChanged(base, { ...base, mode: "program" }), true);
    assert.equal(serverSettingsChanged(base, { ...base, maxNewTokens: 10 }), true);
    assert.equal(serverSettingsChanged(base, { ...base, engine: "http://gpu:8000" }), true);
    assert.equal(serverSettingsChanged(base, { ...base, syntax: "none" }), true);
  });
});

describe("the model", () => {
  it("is left to the server when cad.model is empty: the adapter's base, else the server's default", () => {
    assert.equal(DEFAULTS.model, "");
    assert.equal(toServerSettings(readSettings(reader({ adapter: "/runs/a" }))).model, "");
    assert.equal(toServerSettings(readSettings(reader({ model: " /models/q " }))).model, "/models/q");
  });
});
