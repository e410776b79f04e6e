// Tests run under Node with test/fakes/vscode.ts standing in for the `vscode` module.
import * as path from "node:path";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    alias: { vscode: path.join(__dirname, "test", "fakes", "vscode.ts") },
  },
  test: {
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/setup.ts"],
    environment: "node",
    // The server tests start a Python process; everything else is fast.
    testTimeout: 20_000,
    hookTimeout: 120_000,
  },
});
