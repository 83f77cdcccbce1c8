import http from "node:http";
import os from "node:os";
import path from "node:path";
import fs from "node:fs";
import t from "tap";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { spawnVigil } from "../helpers/process.js";

/**
 * `vigil serve` with METRICS_PORT (issue #33): the admin listener answers GET /metrics on
 * loopback, asks for METRICS_TOKEN when it is set, and with `--workers 2` one scrape covers the
 * whole process group (both API workers' requests summed), on the listener and on the API port.
 */

const TOKEN = "process-metrics-token-0123456789";

/** One request on a connection of its own (so `--workers` hands each to the next worker). */
const get = (url: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; body: string; type: string }>((resolve, reject) => {
    http
      .get(url, { agent: false, headers }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body, type: String(res.headers["content-type"]) }),
        );
      })
      .on("error", reject);
  });

const value = (text: string, series: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};
const HEALTHZ = 'vigil_http_requests_total{route="/healthz",method="GET",status_code="200"}';
const bearer = { authorization: `Bearer ${TOKEN}` };

t.test("one process: the admin listener on loopback, with the token", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-metrics-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const vigil = spawnVigil(t, ["serve"], {
    VIGIL_DATA_DIR: dir,
    PORT: "0",
    METRICS_PORT: "0",
    METRICS_TOKEN: TOKEN,
    LOG_LEVEL: "info",
  });
  const metricsUrl = (
    await vigil.waitFor(/"metrics":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"/, 60_000)
  )[1] as string;
  const api = (await vigil.waitFor(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/, 60_000))[1] as string;
  for (let i = 0; i < 3; i++) t.equal((await get(`${api}/healthz`)).status, 200);
  t.equal((await get(metricsUrl)).status, 401, "no token: 401");
  const ok = await get(metricsUrl, bearer);
  t.equal(ok.status, 200);
  t.match(ok.type, /^text\/plain/);
  t.equal(value(ok.body, HEALTHZ), 3, "the three requests");
  t.match(ok.body, /^process_cpu_seconds_total /m, "process metrics");
  t.equal((await get(metricsUrl.replace("/metrics", "/other"))).status, 404);
  t.notMatch(vigil.output(), TOKEN, "the token is never logged");
  vigil.proc.kill("SIGTERM");
  t.equal((await vigil.exited(30_000)).code, 0);
});

t.test("a METRICS_PORT that is taken stops the start with a clear message", async (t) => {
  const blocker = http.createServer();
  await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
  t.teardown(() => blocker.close());
  const port = (blocker.address() as { port: number }).port;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-metrics-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const vigil = spawnVigil(t, ["serve"], { VIGIL_DATA_DIR: dir, PORT: "0", METRICS_PORT: String(port) });
  t.equal((await vigil.exited(30_000)).code, 1);
  t.match(
    vigil.output(),
    new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}.*choose another METRICS_PORT`),
  );
});

t.test("--workers 2: one scrape sums the process group", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const vigil = spawnVigil(t, ["serve", "--workers", "2"], {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "metrics-test-secret-metrics-test-secret",
    PORT: "0",
    METRICS_PORT: "0",
    METRICS_TOKEN: TOKEN,
    LOG_LEVEL: "info",
  });
  t.teardown(() => {
    for (const m of vigil.output().matchAll(/"workerPid":(\d+)/g)) {
      try {
        process.kill(Number(m[1]), "SIGKILL");
      } catch {
        // gone already
      }
    }
  });
  const metricsUrl = (
    await vigil.waitFor(/"metrics":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"/, 60_000)
  )[1] as string;
  const api = (
    await vigil.waitFor(/API workers listening at (http:\/\/127\.0\.0\.1:\d+)/, 60_000)
  )[1] as string;
  for (const name of ["api-1", "api-2"])
    await vigil.waitFor(new RegExp(`"worker":"${name}"[^\\n]*series store ready`), 60_000);
  for (let i = 0; i < 10; i++) t.equal((await get(`${api}/healthz`)).status, 200);
  const workers = new Set(
    [...vigil.output().matchAll(/"worker":"(api-\d)"[^\n]*"url":"\/healthz"/g)].map((m) => m[1]),
  );
  t.same([...workers].sort(), ["api-1", "api-2"], "both workers answered some");
  const scraped = await get(metricsUrl, bearer);
  t.equal(scraped.status, 200);
  t.equal(value(scraped.body, HEALTHZ), 10, "the admin listener: all ten, summed over the workers");
  // the API port's /metrics answers for the group too, whichever worker takes the scrape
  for (let i = 0; i < 2; i++) {
    const viaApi = await get(`${api}/metrics`, bearer);
    t.equal(viaApi.status, 200);
    t.equal(value(viaApi.body, HEALTHZ), 10, "the API port: the group's figure");
  }
  vigil.proc.kill("SIGTERM");
  t.equal((await vigil.exited(30_000)).code, 0);
});
