// ESLint flat config: TypeScript rules with type information for src/ and test/.
import tseslint from "typescript-eslint";

export default tseslint.config(
  // test/host is a package of its own (a plain Node 24 script driving code-server).
  { ignores: ["out/**", "dist/**", "node_modules/**", "test/host/**"] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "smart"],
    },
  },
  {
    // node:test's describe/it return promises the runner awaits.
    files: ["test/**/*.ts"],
    rules: { "@typescript-eslint/no-floating-promises": "off" },
  },
);
