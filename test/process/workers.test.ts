import http from "node:http";
import t from "tap";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { spawnVigil } from "../helpers/process.js";

/**
 * `vigil serve --workers 2`: two API worker processes answer on one port, one background worker
 * runs the probe and jobs roles, a worker that dies is started again, and SIGTERM drains them all.
 * Which worker answered is told by the logs (every request line carries the worker's name).
 */

/** One request on a connection of its own, so the primary hands each to the next worker. */
const get = (url: string) =>
  new Promise<number>((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      })
      .on("error", reject);
  });

const workersAnswering = (out: string, since = 0) =>
  new Set(
    out
      .slice(since)
      .split("\n")
      .filter((l) => l.includes('"msg":"request completed"'))
      .map((l) => /"worker":"([^"]+)"/.exec(l)?.[1]),
  );

t.test("--workers 2: one port, both workers answer, a dead one restarts, SIGTERM drains", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "workers-test-secret-workers-test-secret",
    PORT: "0",
    LOG_LEVEL: "info",
  };
  const vigil = spawnVigil(t, ["serve", "--workers", "2"], env);
  t.teardown(() => {
    // the workers too, should the test fail before its SIGTERM
    for (const m of vigil.output().matchAll(/"workerPid":(\d+)/g)) {
      try {
        process.kill(Number(m[1]), "SIGKILL");
      } catch {
        // gone already
      }
    }
  });
  const url = (
    await vigil.waitFor(/API workers listening at (http:\/\/127\.0\.0\.1:\d+)/, 60_000)
  )[1] as string;
  for (const name of ["api-1", "api-2"])
    await vigil.waitFor(new RegExp(`"worker":"${name}"[^\\n]*series store ready`), 60_000);
  await vigil.waitFor(/"worker":"background"[^\n]*probe scheduler started/, 60_000);
  const listening = [...vigil.output().matchAll(/"worker":"(api-\d)"[^\n]*Server listening at (\S+)"/g)];
  t.same(
    listening.map((m) => m[2]),
    [url, url],
    "both API workers listen on the one port",
  );

  const ready = [];
  for (let i = 0; i < 10; i++) ready.push(await get(`${url}/readyz`));
  t.same(ready, Array(10).fill(200), "ten requests, each on a new connection, all answered");
  t.same([...workersAnswering(vigil.output())].sort(), ["api-1", "api-2"], "both workers answered");
  t.notOk(
    /"worker":"(api-\d)"[^\n]*probe scheduler started/.test(vigil.output()),
    "the API workers run no probe scheduler",
  );

  // a worker that dies is forked again, and the port keeps answering meanwhile
  const pid = Number(/"name":"api-1","roles":\["api"\],"workerPid":(\d+)/.exec(vigil.output())?.[1]);
  t.ok(pid > 0, "the primary logs each worker's pid");
  process.kill(pid, "SIGKILL");
  await vigil.waitFor(/worker api-1 exited; restarting in 1 s/);
  t.equal(await get(`${url}/healthz`), 200, "api-2 answers while api-1 is down");
  const mark = vigil.output().length;
  await vigil.waitFor(new RegExp(`"name":"api-1","roles":\\["api"\\],"workerPid":(?!${pid})\\d+`));
  const deadline = Date.now() + 20_000;
  const statuses = new Set<number>();
  while (!workersAnswering(vigil.output(), mark).has("api-1") && Date.now() < deadline) {
    statuses.add(await get(`${url}/healthz`));
    await new Promise((r) => setTimeout(r, 50));
  }
  t.same([...statuses], [200], "every request answered meanwhile");
  t.ok(workersAnswering(vigil.output(), mark).has("api-1"), "the new api-1 answers");

  vigil.proc.kill("SIGTERM");
  const exit = await vigil.exited(30_000);
  t.equal(exit.code, 0, "the primary exits 0 once every worker has drained");
  const out = vigil.output();
  for (const name of ["api-1", "api-2", "background"])
    t.match(out, new RegExp(`"worker":"${name}"[^\\n]*"msg":"shutdown complete"`), `${name} drained`);
  t.match(out, /"worker":"primary"[^\n]*"msg":"shutdown complete"/);
});

t.test("--workers needs PostgreSQL and the api role", async (t) => {
  const embedded = spawnVigil(t, ["serve", "--workers", "2"], { PORT: "0" });
  t.equal((await embedded.exited()).code, 2);
  t.match(embedded.output(), /--workers needs PostgreSQL \(DATABASE_URL\)/);
  const bad = spawnVigil(t, ["serve", "--workers", "zero"], { PORT: "0" });
  t.equal((await bad.exited()).code, 2);
  t.match(bad.output(), /--workers: must be a whole number from 1 to 64/);
  const noApi = spawnVigil(t, ["serve", "--workers", "2", "--roles", "probe"], {
    PORT: "0",
    DATABASE_URL: "postgres://postgres@127.0.0.1:1/none",
  });
  t.equal((await noApi.exited()).code, 2);
  t.match(noApi.output(), /include the api role/);
});
