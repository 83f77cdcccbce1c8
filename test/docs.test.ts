import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { envSchema } from "../src/config.js";
import { packageRoot } from "../src/lib/paths.js";

const read = (f: string) => fs.readFileSync(path.join(packageRoot, f), "utf8");

t.test("docker-compose.yml runs the QuestDB version pinned in scripts/questdb.sh", async (t) => {
  const pinned = execFileSync("bash", [path.join(packageRoot, "scripts/questdb.sh"), "version"])
    .toString()
    .trim();
  t.match(pinned, /^\d+\.\d+\.\d+$/);
  t.match(
    read("docker-compose.yml"),
    new RegExp(`image: questdb/questdb:${pinned.replace(/\./g, "\\.")}\\n`),
  );
});

t.test(".env.example and docs/configuration.md list every configuration variable", async (t) => {
  const example = read(".env.example");
  const configuration = read("docs/configuration.md");
  for (const name of Object.keys(envSchema.shape)) {
    t.match(example, new RegExp(`^${name}=`, "m"), `.env.example has ${name}`);
    t.match(
      configuration,
      new RegExp(`^\\| \`${name}\` \\|`, "m"),
      `docs/configuration.md's configuration table has ${name}`,
    );
  }
});

t.test("the README links to every page in docs/", async (t) => {
  const readme = read("README.md");
  const pages = fs
    .readdirSync(path.join(packageRoot, "docs"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f.split(path.sep).join("/")}`);
  t.ok(pages.length > 0, "docs/ has pages");
  for (const page of pages) t.ok(readme.includes(`](${page})`), `the README links to ${page}`);
});

t.test("every way of starting the server passes the same V8 flags (src/lib/node-flags.ts)", async (t) => {
  const { SERVER_NODE_FLAGS } = await import("../src/lib/node-flags.js");
  t.ok(SERVER_NODE_FLAGS.length > 0);
  const flags = SERVER_NODE_FLAGS.join(" ");
  const scripts = (JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts;
  t.ok(scripts.start?.includes(`node ${flags} dist/src/cli.js serve`), "npm start");
  t.ok(
    scripts.bench?.includes(`node ${flags} dist/src/cli.js bench`),
    "npm run bench (Vigil in its process)",
  );
  const cmd = JSON.stringify(["node", ...SERVER_NODE_FLAGS, "dist/src/cli.js", "serve"]).replace(/,/g, ", ");
  t.ok(read("Dockerfile").includes(`CMD ${cmd}`), "the image's command");
  t.equal(
    read("src/cli.ts").split("\n")[0],
    `#!/usr/bin/env -S node ${flags}`,
    "the vigil command's first line",
  );
  t.ok(read("docs/configuration.md").includes(`node ${flags}`), "docs/configuration.md says so");
});
