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

t.test(".env.example and the README list every configuration variable", async (t) => {
  const example = read(".env.example");
  const readme = read("README.md");
  for (const name of Object.keys(envSchema.shape)) {
    t.match(example, new RegExp(`^${name}=`, "m"), `.env.example has ${name}`);
    t.match(readme, new RegExp(`\\| \`${name}\``), `README configuration table has ${name}`);
  }
});
