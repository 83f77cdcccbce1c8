import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { serveOnFreePort, spawnVigil } from "../helpers/process.js";

const tmpDir = (t: Test) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-serve-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
};

t.test("embedded default: serves, guards its folder, shuts down cleanly on SIGTERM", async (t) => {
  const dir = tmpDir(t);
  const server = await serveOnFreePort(t, { VIGIL_DATA_DIR: dir });
  await server.waitFor(/series store ready/, 60_000); // PGlite's first migrations take 10+ s on a slow host
  t.match(server.output(), new RegExp(`data lives in ${dir}`), "says where its data lives");
  const ready = await fetch(`${server.url}/readyz`);
  t.equal(ready.status, 200);

  const second = spawnVigil(t, ["serve"], { VIGIL_DATA_DIR: dir, PORT: "0" });
  const secondExit = await second.exited();
  t.equal(secondExit.code, 1, "a second process on the same folder stops");
  t.match(second.output(), /in use by another Vigil process/);

  server.proc.kill("SIGTERM");
  const exit = await server.exited(10_000);
  t.equal(exit.code, 0, "exit 0 after SIGTERM");
  t.match(server.output(), /shutdown complete/);
  t.notOk(fs.existsSync(path.join(dir, "vigil.lock")), "folder lock released");
  // the whole life of the process on this Node (CI runs the suite on Node 24 and 22)
  t.notMatch(
    server.output(),
    /DeprecationWarning|ExperimentalWarning|\(node:\d+\)/,
    `no warning from Node ${process.version}`,
  );
});

t.test("unreachable Postgres: keeps retrying, /readyz 503, SIGTERM still exits promptly", async (t) => {
  const server = await serveOnFreePort(t, { DATABASE_URL: "postgres://postgres@127.0.0.1:1/vigil" });
  await server.waitFor(/postgres is unreachable; retrying/);
  const health = await fetch(`${server.url}/healthz`);
  t.equal(health.status, 200);
  const ready = await fetch(`${server.url}/readyz`);
  t.equal(ready.status, 503);
  t.match(((await ready.json()) as { error: string }).error, /relational store \(postgres\)/);
  server.proc.kill("SIGTERM");
  const started = Date.now();
  const exit = await server.exited(10_000);
  t.equal(exit.code, 0);
  t.ok(Date.now() - started < 5_000, "does not hang on shutdown");
});

t.test("a bad configuration value stops the process naming the variable", async (t) => {
  const run = spawnVigil(t, ["serve"], { PORT: "eighty" });
  const exit = await run.exited();
  t.equal(exit.code, 2);
  t.match(run.output(), /PORT: must be a port number/);
  const roles = spawnVigil(t, ["serve", "--roles", "api,cooking"], {});
  t.equal((await roles.exited()).code, 2);
  t.match(roles.output(), /unknown role "cooking"/);
});

t.test("vigil migrate applies once, then reports up to date", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const url = await freshDatabaseUrl(t);
  const first = spawnVigil(t, ["migrate"], { DATABASE_URL: url });
  t.equal((await first.exited()).code, 0, first.output());
  t.match(first.output(), /applied 001_series/);
  const again = spawnVigil(t, ["migrate"], { DATABASE_URL: url });
  t.equal((await again.exited()).code, 0);
  t.match(again.output(), /database is up to date/);
});

t.test("unknown commands and help", async (t) => {
  const help = spawnVigil(t, ["--help"]);
  t.equal((await help.exited()).code, 0);
  t.match(help.output(), /Usage: vigil <command>/);
  const bad = spawnVigil(t, ["frobnicate"]);
  t.equal((await bad.exited()).code, 2);
  t.match(bad.output(), /unknown command "frobnicate"/);
});
