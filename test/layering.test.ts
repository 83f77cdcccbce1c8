import fs from "node:fs";
import path from "node:path";
import { ESLint } from "eslint";
import t from "tap";
import { packageRoot } from "../src/lib/paths.js";

/**
 * The layering of docs/ARCHITECTURE.md, held by the build: feature code imports no transport,
 * the core imports no feature, and SQL runs only in the stores and the repositories.
 */
const eslint = new ESLint({ cwd: packageRoot });
const problems = async (file: string, code: string) =>
  (await eslint.lintText(code, { filePath: path.join(packageRoot, file) }))
    .flatMap((r) => r.messages)
    .filter((m) => m.ruleId === "no-restricted-imports")
    .map((m) => m.message);

t.test(
  "npm run lint refuses a feature importing the HTTP layer, and the core importing a feature",
  async (t) => {
    const http = 'import { ApiError } from "../http/errors.js";\nexport const e = ApiError;\n';
    t.match(await problems("src/connections/probe.ts", http), [/transport-free/], "feature -> http");
    t.match(
      await problems(
        "src/connections/probe.ts",
        'import Fastify from "fastify";\nexport const f = Fastify;\n',
      ),
      [/transport-free/],
      "feature -> fastify",
    );
    t.match(
      await problems(
        "src/core/probe.ts",
        'import { keyStore } from "../identity/keys.js";\nexport const k = keyStore;\n',
      ),
      [/src\/core imports only/],
      "core -> feature",
    );
    t.same(await problems("src/http/probe.ts", http), [], "the HTTP layer itself may");
    t.same(
      await problems(
        "src/core/probe.ts",
        'import type { Config } from "../config.js";\nexport type C = Config;\n',
      ),
      [],
      "the core may read config",
    );
  },
);

t.test("SQL runs only in src/stores and in repository.ts files", async (t) => {
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.endsWith(".ts")) {
        const rel = path.relative(packageRoot, p);
        if (rel.startsWith(path.join("src", "stores")) || rel.endsWith("repository.ts")) continue;
        // a call that sends a statement: .query( or .query<
        if (/\.query\s*[(<]/.test(fs.readFileSync(p, "utf8"))) offenders.push(rel);
      }
    }
  };
  walk(path.join(packageRoot, "src"));
  t.same(offenders, [], "no file outside stores/ and repositories sends a query");
});
