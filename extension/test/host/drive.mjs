// The extension in a real VS Code host. code-server (VS Code in the browser) gets the packaged
// extension and a workspace holding mean.py and util.py; headless Chromium opens it.
// 1. In mean.py it selects line 2, puts a program on the clipboard, runs "Copy-as-Decode:
//    Apply Program…" and picks the clipboard, saves, and the file on disk must be the expected
//    text byte for byte.
// 2. In util.py it runs "Copy-as-Decode: Apply Program to Files…" with mean.py as context and
//    a multi-file program that copies from it and creates helpers.py; a diff of each file must
//    open, and after "Apply" and "Save All" both files on disk must be the expected text.
// A screenshot of each edited document is kept.
//
// Environment: CAD_VSIX (the .vsix to install), CAD_COMMAND (the cad executable the extension
// starts), CHROMIUM (default: chromium on the PATH), CAD_HOST_ARTIFACTS (where the screenshot
// and logs go; default: ./artifacts). Run through run.sh, which installs everything.

import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

import puppeteer from "puppeteer-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CODE_SERVER = path.join(HERE, "node_modules", "code-server", "out", "node", "entry.js");
const ARTIFACTS = path.resolve(process.env.CAD_HOST_ARTIFACTS ?? path.join(HERE, "artifacts"));
const BEFORE = "def mean(values):\n    return sum(values) / len(values) + 1\n\n\nprint(mean([1, 2]))\n";
const AFTER =
  "def mean(values):\n    if not values:\n        return 0.0\n    return sum(values) / len(values)\n\n\nprint(mean([1, 2]))\n";
const PROGRAM = "<gen>    if not values:\n        return 0.0\n    return sum(values) / len(values)\n</gen>\n</program>\n";
const UTIL_BEFORE = "X = 1\n";
const UTIL_AFTER = `X = 1\n${AFTER.split("\n").slice(0, 4).join("\n")}\n`;
const HELPERS_AFTER = "def mean(values):\n";
const MULTI_PROGRAM =
  '<edit file="1">\n<copy lines="1-1"/>\n<copy file="2" lines="1-4"/>\n</edit>\n' +
  '<create path="helpers.py">\n<copy file="2" lines="1-1"/>\n</create>\n</program>\n';
const STEP_TIMEOUT_MS = 120_000;

function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set (run.sh sets it)`);
  }
  return value;
}

/** A free TCP port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Wait until `check` returns a truthy value (polling), or fail with `what`. */
async function until(what, check, timeoutMs = STEP_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Folders for one run: user data (with settings), extensions, the workspace, code-server config. */
function prepare(root, cadCommand) {
  const folders = {
    data: path.join(root, "data"),
    extensions: path.join(root, "extensions"),
    workspace: path.join(root, "workspace"),
    config: path.join(root, "config.yaml"),
  };
  for (const folder of [folders.extensions, folders.workspace, path.join(folders.data, "User")]) {
    fs.mkdirSync(folder, { recursive: true });
  }
  fs.writeFileSync(folders.config, "auth: none\n");
  fs.writeFileSync(path.join(folders.workspace, "mean.py"), BEFORE);
  fs.writeFileSync(path.join(folders.workspace, "util.py"), UTIL_BEFORE);
  const settings = {
    "cad.serverCommand": cadCommand,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "telemetry.telemetryLevel": "off",
    "extensions.ignoreRecommendations": true,
    "extensions.autoCheckUpdates": false,
    "update.mode": "none",
    "security.workspace.trust.enabled": false,
    "editor.minimap.enabled": false,
    "files.autoSave": "off",
    "chat.disableAIFeatures": true,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
  };
  fs.writeFileSync(path.join(folders.data, "User", "settings.json"), JSON.stringify(settings, null, 2));
  return folders;
}

function codeServer(folders, args, log) {
  const common = [
    CODE_SERVER,
    "--config", folders.config,
    "--user-data-dir", folders.data,
    "--extensions-dir", folders.extensions,
    "--disable-telemetry",
    "--disable-update-check",
    "--disable-workspace-trust",
  ];
  return spawn(process.execPath, [...common, ...args], {
    env: { ...process.env, PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", log, log],
  });
}

/** Run one command of the command palette (F1), by its title. */
async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = await page.waitForSelector(".quick-input-widget input", { visible: true });
  await input.type(title);
  // Several commands can match the typed title ("Apply Program…" and "Apply Program to
  // Files…"), so the row whose label is exactly the title is the one clicked.
  const row = await until(`the command "${title}" in the palette`, async () => {
    const rows = await page.$$(".quick-input-list .monaco-list-row");
    for (const candidate of rows) {
      const label = await candidate.$eval(".label-name", (name) => name.textContent?.trim() ?? "").catch(() => "");
      if (label === title) {
        return candidate;
      }
    }
    return undefined;
  });
  await row.click();
}

/** Open `name` through quick open (Ctrl+P) and wait until the editor shows `marker`. */
async function openFile(page, name, marker) {
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyP");
  await page.keyboard.up("Control");
  const quickOpen = await page.waitForSelector(".quick-input-widget input", { visible: true });
  await quickOpen.type(name);
  await until(`${name} in quick open`, () =>
    page.evaluate((wanted) => [...document.querySelectorAll(".quick-input-list .monaco-list-row")].some((row) => row.textContent?.includes(wanted)), name),
  );
  await page.keyboard.press("Enter");
  await until(`${name} in the editor`, async () => (await editorText(page)).includes(marker));
}

/** The quick pick's row whose label is exactly `label`, once it is shown. */
function quickPickRow(page, label) {
  return until(`"${label}" in the quick pick`, async () => {
    for (const row of await page.$$(".quick-input-list .monaco-list-row")) {
      const text = await row.$eval(".label-name", (name) => name.textContent?.trim() ?? "").catch(() => "");
      if (text === label) {
        return row;
      }
    }
    return undefined;
  });
}

/** Wait for a quick pick titled `title` (its title bar holds it). */
function quickPickTitled(page, title) {
  return until(`the quick pick "${title}"`, () =>
    page.evaluate((wanted) => {
      const widget = document.querySelector(".quick-input-widget");
      return widget !== null && widget.style.display !== "none" && (widget.querySelector(".quick-input-title")?.textContent ?? "").includes(wanted);
    }, title),
  );
}

/** The text of the visible editor lines (Monaco renders spaces as non-breaking spaces). */
function editorText(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll(".editor-instance .view-lines .view-line")]
      .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
      .map((line) => line.textContent.replace(/\u00a0/g, " "))
      .join("\n"),
  );
}

async function main() {
  const vsix = required("CAD_VSIX");
  const cadCommand = required("CAD_COMMAND");
  const chromium = process.env.CHROMIUM || "chromium";
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cad-host-"));
  const folders = prepare(root, cadCommand);
  const log = fs.openSync(path.join(ARTIFACTS, "code-server.log"), "w");

  const installed = spawnSync(
    process.execPath,
    [CODE_SERVER, "--config", folders.config, "--user-data-dir", folders.data,
      "--extensions-dir", folders.extensions, "--install-extension", vsix],
    { encoding: "utf-8" },
  );
  if (installed.status !== 0) {
    throw new Error(`installing ${vsix} failed:\n${installed.stdout}${installed.stderr}`);
  }

  const port = await freePort();
  const server = codeServer(folders, ["--bind-addr", `127.0.0.1:${port}`, folders.workspace], log);
  let browser;
  try {
    await until("code-server to listen", async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
      } catch {
        return false;
      }
    });
    browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,800"],
      defaultViewport: { width: 1280, height: 800 },
    });
    const origin = `http://127.0.0.1:${port}`;
    await browser.defaultBrowserContext().overridePermissions(origin, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
    const page = await browser.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    await page.goto(`${origin}/?folder=${encodeURIComponent(folders.workspace)}`);
    await page.waitForSelector(".monaco-workbench .part.statusbar", { visible: true });
    await until("the extension's status bar item", () =>
      page.evaluate(() => [...document.querySelectorAll(".statusbar-item")].some((item) => /\bcad\b/.test(item.textContent ?? ""))),
    );

    await openFile(page, "mean.py", "+ 1");

    // Select line 2, from its start to the start of line 3.
    await page.click(".editor-instance .view-lines");
    await page.keyboard.down("Control");
    await page.keyboard.press("KeyG");
    await page.keyboard.up("Control");
    await page.waitForSelector(".quick-input-widget input", { visible: true });
    await page.keyboard.type("2");
    await page.keyboard.press("Enter");
    await page.keyboard.press("Home");
    await page.keyboard.press("Home");
    await page.keyboard.down("Shift");
    await page.keyboard.press("ArrowDown");
    await page.keyboard.up("Shift");

    await page.bringToFront();
    await page.evaluate((program) => navigator.clipboard.writeText(program), PROGRAM);
    await runCommand(page, "Copy-as-Decode: Apply Program…");
    await until("the program source choice", () =>
      page.evaluate(() => [...document.querySelectorAll(".quick-input-list .monaco-list-row")].some((row) => row.textContent?.includes("From the clipboard"))),
    );
    await page.keyboard.type("From the clipboard");
    await page.keyboard.press("Enter");
    await until("the edited document", async () => (await editorText(page)).includes("return 0.0"));

    await page.keyboard.down("Control");
    await page.keyboard.press("KeyS");
    await page.keyboard.up("Control");
    const file = path.join(folders.workspace, "mean.py");
    await until("mean.py saved", () => fs.readFileSync(file, "utf-8") !== BEFORE);
    await until("the progress notification to close", () =>
      page.evaluate(() => document.querySelector(".notifications-toasts .notification-toast") === null),
    ).catch(() => undefined);
    await page.screenshot({ path: path.join(ARTIFACTS, "edited.png") });
    const saved = fs.readFileSync(file, "utf-8");
    if (saved !== AFTER) {
      throw new Error(`mean.py is not the expected text:\n${JSON.stringify(saved)}\nexpected:\n${JSON.stringify(AFTER)}`);
    }
    console.log(`ok: the document changed exactly; screenshot: ${path.join(ARTIFACTS, "edited.png")}`);

    // Several files: util.py (file 1) takes mean.py's function (context, file 2), and a new
    // helpers.py copies its first line; a diff of each shows them before anything changes.
    await openFile(page, "util.py", "X = 1");
    await page.evaluate((program) => navigator.clipboard.writeText(program), MULTI_PROGRAM);
    await runCommand(page, "Copy-as-Decode: Apply Program to Files…");
    await quickPickTitled(page, "files to edit");
    await quickPickRow(page, "util.py");
    await page.keyboard.press("Enter");
    await quickPickTitled(page, "context files");
    await (await quickPickRow(page, "mean.py")).click(); // ticks its checkbox
    await until("mean.py ticked", () =>
      page.evaluate(() => document.querySelector(".quick-input-widget .quick-input-count")?.textContent?.includes("1") ?? false),
    );
    await page.keyboard.press("Enter");
    await quickPickTitled(page, "program to apply");
    await (await quickPickRow(page, "From the clipboard")).click();
    const apply = await until("the Apply button of the edit's question", async () => {
      for (const button of await page.$$(".notification-toast .monaco-button")) {
        if ((await button.evaluate((node) => node.textContent?.trim() ?? "")) === "Apply") {
          return button;
        }
      }
      return undefined;
    });
    await until("the diffs of util.py and helpers.py", () =>
      page.evaluate(() => {
        const tabs = [...document.querySelectorAll(".tabs-container .tab")].map((tab) => tab.textContent ?? "");
        return tabs.some((tab) => tab.includes("util.py ↔")) && tabs.some((tab) => tab.includes("helpers.py (new) ↔"));
      }),
    );
    await page.screenshot({ path: path.join(ARTIFACTS, "preview.png") });
    if (fs.readFileSync(path.join(folders.workspace, "util.py"), "utf-8") !== UTIL_BEFORE) {
      throw new Error("util.py changed before the edit was accepted");
    }
    await apply.click();
    await until("util.py edited", async () => (await editorText(page)).includes("def mean"));
    await runCommand(page, "File: Save All Files");
    const util = path.join(folders.workspace, "util.py");
    const helpers = path.join(folders.workspace, "helpers.py");
    await until("util.py saved", () => fs.readFileSync(util, "utf-8") !== UTIL_BEFORE);
    await until("helpers.py written", () => fs.existsSync(helpers) && fs.readFileSync(helpers, "utf-8") !== "");
    await page.screenshot({ path: path.join(ARTIFACTS, "files.png") });
    for (const [file, expected] of [[util, UTIL_AFTER], [helpers, HELPERS_AFTER]]) {
      const saved = fs.readFileSync(file, "utf-8");
      if (saved !== expected) {
        throw new Error(`${path.basename(file)} is not the expected text:\n${JSON.stringify(saved)}\nexpected:\n${JSON.stringify(expected)}`);
      }
    }
    console.log(`ok: both files changed exactly after their preview; screenshot: ${path.join(ARTIFACTS, "files.png")}`);
  } catch (error) {
    const pages = browser ? await browser.pages() : [];
    if (pages.length > 0) {
      await pages[pages.length - 1].screenshot({ path: path.join(ARTIFACTS, "failure.png") }).catch(() => undefined);
    }
    throw error;
  } finally {
    await browser?.close();
    server.kill();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
