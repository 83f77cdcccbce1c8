#!/usr/bin/env node
// The fuzz suite on demand (`npm run fuzz -- --runs N [--seed S] [--only rest,mcp,oauth,backends]`):
// the same property-based tests CI runs (test/fuzz, fixed seed, few runs), with N requests per
// route, tool and form, from seed S (a random one when not given; printed, so a failure can be
// replayed). Runs through scripts/test.sh, which builds, points the tests at PostgreSQL and
// QuestDB (starting a private QuestDB when none is configured) and cleans up. Prints each test's
// progress as it goes and, at the end, the requests tried per route, tool and form.
/* global process, console */
import { spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const PARTS = ["rest", "backends", "mcp", "oauth"];

function usage(message) {
  if (message) console.error(`fuzz: ${message}`);
  console.error(
    "usage: npm run fuzz -- [--runs N] [--seed S] [--only rest,backends,mcp,oauth] [-- <tap options>]\n" +
      "  --runs N   requests per route, tool and form (default 500; CI runs 40)\n" +
      "  --seed S   the seed (default: a random one, printed)\n" +
      "  --only     the parts to run (default: all)",
  );
  process.exit(2);
}

const args = process.argv.slice(2);
let runs = 500;
let seed = randomInt(1, 2 ** 31 - 1);
let only = PARTS;
const tapArgs = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const value = () => {
    const v = a.includes("=") ? a.slice(a.indexOf("=") + 1) : args[++i];
    if (v === undefined) usage(`${a} needs a value`);
    return v;
  };
  if (a === "--") {
    tapArgs.push(...args.slice(i + 1));
    break;
  } else if (a.startsWith("--runs")) runs = Number(value());
  else if (a.startsWith("--seed")) seed = Number(value());
  else if (a.startsWith("--only")) only = value().split(",");
  else if (a === "-h" || a === "--help") usage();
  else usage(`unknown option ${a}`);
}
if (!Number.isSafeInteger(runs) || runs < 1) usage("--runs must be a whole number of at least 1");
if (!Number.isSafeInteger(seed)) usage("--seed must be a whole number");
const unknown = only.filter((p) => !PARTS.includes(p));
if (unknown.length) usage(`unknown part ${unknown.join(", ")}; the parts are ${PARTS.join(", ")}`);

const reports = mkdtempSync(join(tmpdir(), "vigil-fuzz-"));
const files = only.map((p) => `test/fuzz/${p}.test.ts`);
const started = Date.now();
console.log(`fuzz: ${runs} requests a route, tool and form; seed ${seed}; ${only.join(", ")}`);
console.log(`fuzz: replay with: npm run fuzz -- --runs ${runs} --seed ${seed} --only ${only.join(",")}`);

const child = spawn("bash", ["scripts/test.sh", ...files, "--timeout=0", ...tapArgs], {
  cwd: ROOT,
  stdio: "inherit",
  env: {
    ...process.env,
    FUZZ_RUNS: String(runs),
    FUZZ_SEED: String(seed),
    // the tests write their progress to stderr and their tables here
    FUZZ_PROGRESS: "1",
    FUZZ_REPORT_DIR: reports,
  },
});
const stop = (signal) => child.kill(signal);
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
child.on("exit", (code, signal) => {
  const tables = readdirSync(reports)
    .sort()
    .map((f) => readFileSync(join(reports, f), "utf8"));
  rmSync(reports, { recursive: true, force: true });
  if (tables.length) console.log(`\n${tables.join("\n\n")}`);
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  const outcome = code === 0 ? "passed" : signal ? `stopped by ${signal}` : "FAILED";
  console.log(`\nfuzz: ${outcome} in ${minutes} min (seed ${seed}, ${runs} runs)`);
  process.exit(code ?? 1);
});
