/**
 * Runs before every test file: makes the fake `vscode` module what `require("vscode")` returns
 * (the language client is plain CommonJS, which vitest's alias does not reach), and resets the
 * fake between tests.
 */

import Module, { createRequire } from "node:module";
import { beforeEach } from "vitest";

import * as vscode from "./fakes/vscode";

/** The file name `require("vscode")` resolves to; it only keys the module cache. */
const FAKE_VSCODE = "/fake-vscode/index.js";

/** Node's resolver; there is no public hook for `require` on Node 20. */
interface Resolver {
  _resolveFilename(request: string, ...rest: unknown[]): string;
}

const resolver = Module as unknown as Resolver;
const resolveFilename = resolver._resolveFilename.bind(Module);
resolver._resolveFilename = (request: string, ...rest: unknown[]): string =>
  request === "vscode" ? FAKE_VSCODE : resolveFilename(request, ...rest);

const module = new Module(FAKE_VSCODE);
module.filename = FAKE_VSCODE;
module.loaded = true;
module.exports = vscode;
createRequire(__filename).cache[FAKE_VSCODE] = module;

beforeEach(() => vscode.fake.reset());
