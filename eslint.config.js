// Lint: typescript-eslint's type-aware recommended rules, plus the project's own habits:
// no `any`, no non-null assertions where a check belongs, type-only imports marked as such;
// and the layering (docs/ARCHITECTURE.md): feature code knows no transport, the core knows no feature.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

const TRANSPORT_FREE =
  "Feature code is transport-free: throw a ServiceError (src/core/errors.ts) and return plain results; " +
  "the HTTP layer (src/http) maps them. See docs/ARCHITECTURE.md.";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", ".questdb/", "data/", "coverage/", ".tap/", ".tmp/", ".node/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // the dashboard's own scripts run in the browser (plain JavaScript, no build step)
  { files: ["assets/**/*.js"], languageOptions: { globals: { ...globals.browser, uPlot: "readonly" } } },
  {
    files: ["**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-non-null-assertion": "error",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-constant-condition": ["error", { checkLoops: false }],
    },
  },
  {
    // Everything under src/ except the doors (http/, and the process wiring that builds them).
    files: ["src/**/*.ts"],
    ignores: [
      "src/http/**",
      "src/mcp/**",
      "src/oauth/**",
      "src/dashboard/**",
      "src/app.ts",
      "src/server.ts",
      "src/cli.ts",
    ],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          paths: [
            { name: "fastify", message: TRANSPORT_FREE },
            { name: "@modelcontextprotocol/sdk", message: TRANSPORT_FREE },
          ],
          patterns: [
            {
              group: [
                "**/http/*",
                "**/http/**",
                "../app.js",
                "../../app.js",
                "../server.js",
                "../../server.js",
                "@fastify/*",
              ],
              message: TRANSPORT_FREE,
            },
          ],
        },
      ],
    },
  },
  {
    // The core (errors, actor, context, pages) is what every feature builds on: it imports no feature.
    files: ["src/core/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: "^\\.\\./(?!config\\.js$|lib/|stores/)",
              message:
                "src/core imports only config, lib and stores: features build on the core, not the other way.",
            },
          ],
        },
      ],
    },
  },
);
