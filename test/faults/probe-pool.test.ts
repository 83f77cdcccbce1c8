import net from "node:net";
import pg from "pg";
import t from "tap";
import { nextSlot } from "../../src/probes/schedule.js";
import { ProbeSlots } from "../../src/probes/slots.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { spawnVigil } from "../helpers/process.js";
import { account, createConnection, serveReady, sleep, table } from "./lib.js";

/**
 * The probe pool filled with targets that hang. `vigil serve --roles probe` runs with
 * PROBE_CONCURRENCY=4 and PROBE_TIMEOUT_MS=2000; 16 connections point at a TCP server that
 * accepts and never answers (each of their checks holds a request slot for the whole timeout:
 * 16 x 2 s per 10 s interval is 32 slot-seconds, most of the 40 the pool has), and 6 healthy
 * connections point at a workflow_a simulator. Checked over 45 s:
 *
 * - the healthy connections keep their schedule: a check at every 10 s slot, each within a second
 *   of its slot, none late enough to be gap-filled;
 * - the hanging ones time out at PROBE_TIMEOUT_MS (the hanging server sees each request's socket
 *   closed after ~2 s) and record failures (samples with reason `timeout`, failure counters).
 */
t.setTimeout(Number(process.env.FAULT_POOL_TIMEOUT_S ?? 240) * 1000);

const CONCURRENCY = 4;
const TIMEOUT_MS = 2_000;
const INTERVAL_S = 10;
const HANGING = 16;
const HEALTHY = 6;
const RUN_MS = Number(process.env.FAULT_POOL_RUN_MS ?? 45_000);
/** A healthy check may start this late after its slot (the claim, the check itself, a busy host). */
const MAX_LAG_MS = 1_000;

t.test("hanging targets fill the probe pool; healthy connections keep their schedule", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "probe-pool-secret-probe-pool-secret-0001",
    PROBE_CONCURRENCY: String(CONCURRENCY),
    PROBE_TIMEOUT_MS: String(TIMEOUT_MS),
    LOG_LEVEL: "warn",
  };

  // Accepts and never answers; records how long each connection stayed open.
  const held = new Set<net.Socket>();
  const lifetimes: number[] = [];
  const hang = net.createServer((s) => {
    let asked = 0;
    held.add(s);
    s.on("error", () => {});
    // read (and ignore) the request, so that the prober's close is seen at once
    s.on("data", () => {
      asked ||= Date.now();
    });
    s.on("close", () => {
      held.delete(s);
      if (asked) lifetimes.push(Date.now() - asked);
    });
  });
  await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
  t.teardown(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => hang.close(r));
  });
  const hangUrl = `http://127.0.0.1:${(hang.address() as net.AddressInfo).port}`;
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());

  const { key } = await account(t, env, "pool@x.example");
  // The API role alone first, so every connection exists before the first claim.
  const api = await serveReady(t, env, ["--roles", "api"]);
  const healthy: string[] = [];
  const hanging: string[] = [];
  for (let i = 0; i < HANGING; i++)
    hanging.push(
      (
        await createConnection(api.url, key, {
          service_type: "workflow_a",
          service_name: `hanging-${i}`,
          base_url: `${hangUrl}/n8n-${i}`,
          api_key: "k",
          check_interval_seconds: INTERVAL_S,
        })
      ).id,
    );
  for (let i = 0; i < HEALTHY; i++)
    healthy.push(
      (
        await createConnection(api.url, key, {
          service_type: "workflow_a",
          service_name: `healthy-${i}`,
          base_url: sim.url,
          api_key: "sim-api-key",
          check_interval_seconds: INTERVAL_S,
        })
      ).id,
    );
  const probe = spawnVigil(t, ["serve", "--roles", "probe"], { ...env, LOG_LEVEL: "info" });
  await probe.waitFor(/probe scheduler started/, 60_000);
  const started = Date.now();
  await sleep(RUN_MS);
  const ended = Date.now();

  const db = new pg.Client({ connectionString: env.DATABASE_URL });
  await db.connect();
  t.teardown(() => db.end());
  const samples = (
    await db.query<{
      connection_id: string;
      ts: Date;
      available: boolean;
      reason: string | null;
      source: string;
    }>(
      `SELECT connection_id, ts, available, reason, source FROM availability_samples
        WHERE ts >= to_timestamp($1 / 1000.0) AND ts <= to_timestamp($2 / 1000.0) ORDER BY ts`,
      [started, ended],
    )
  ).rows;
  probe.proc.kill("SIGTERM");
  api.proc.kill("SIGTERM");

  // Healthy: a real sample at every slot. A connection's slots are fixed (a phase within its
  // interval, src/probes/schedule.ts); a check is claimed ahead and starts at its slot, so its
  // sample's time minus the slot is how long it waited for a request slot, plus the check itself.
  // The first check of a new connection runs at once, off its phase: it is left out.
  const rows: (string | number)[][] = [["connection", "checks", "gap-fill", "lag p50 ms", "lag max ms"]];
  const lags: number[] = [];
  const intervalMs = INTERVAL_S * 1000;
  for (const id of healthy) {
    const mine = samples.filter((s) => s.connection_id === id);
    const real = mine.filter((s) => s.source === "probe");
    const filled = mine.filter((s) => s.source === "gap_fill").length;
    const phase = nextSlot(id, INTERVAL_S, new Date(0)).getTime() % intervalMs;
    const lag = real.slice(1).map((s) => (((s.ts.getTime() - phase) % intervalMs) + intervalMs) % intervalMs);
    lags.push(...lag);
    const sorted = [...lag].sort((a, b) => a - b);
    rows.push([
      id.slice(0, 8),
      real.length,
      filled,
      sorted[sorted.length >> 1] ?? "-",
      sorted[sorted.length - 1] ?? "-",
    ]);
    t.ok(
      real.length >= Math.floor(RUN_MS / intervalMs) - 1 && real.every((s) => s.available),
      `healthy ${id.slice(0, 8)}: ${real.length} successful checks in ${RUN_MS / 1000} s`,
    );
    t.equal(filled, 0, `healthy ${id.slice(0, 8)}: no slot missed (no gap-fill)`);
    t.ok(
      lag.every((x) => x <= MAX_LAG_MS),
      `healthy ${id.slice(0, 8)}: every check within ${MAX_LAG_MS} ms of its slot (lags ${lag.join(", ")} ms)`,
    );
  }

  // Hanging: each check gives up at the timeout and is recorded as a failure.
  const timeouts = samples.filter((s) => hanging.includes(s.connection_id) && s.source === "probe");
  t.ok(
    timeouts.length > 0 && timeouts.every((s) => !s.available && s.reason === "timeout"),
    `${timeouts.length} checks of hanging targets recorded as timeouts`,
  );
  const checked = new Set(timeouts.map((s) => s.connection_id));
  t.equal(checked.size, HANGING, "every hanging target was checked and its failure recorded");
  const failing = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM connections WHERE id = ANY($1) AND consecutive_failures > 0",
    [hanging],
  );
  t.equal(failing.rows[0]?.n, HANGING, "their failure counters moved");
  const sorted = [...lifetimes].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  t.ok(
    median >= TIMEOUT_MS - 50 && median <= TIMEOUT_MS + 1_000,
    `a hanging request is given up at the timeout: median ${median} ms over ${sorted.length} (PROBE_TIMEOUT_MS ${TIMEOUT_MS})`,
  );
  t.comment(
    `probe pool (concurrency ${CONCURRENCY}, timeout ${TIMEOUT_MS} ms, ${HANGING} hanging, ${HEALTHY} healthy, ${RUN_MS / 1000} s): ` +
      `healthy checks' lag behind their slot: max ${Math.max(...lags)} ms; ${timeouts.length} timeouts recorded; ` +
      `hanging requests held ${sorted[0] ?? 0}-${sorted[sorted.length - 1] ?? 0} ms\n${table(rows)}`,
  );
});

t.test("probe slots: suspects never take the reserve; healthy checks go first", async (t) => {
  const slots = new ProbeSlots(4);
  t.equal(slots.suspectMax, 3, "one of four slots is kept for connections that were fine");
  const gates: (() => void)[] = [];
  const order: string[] = [];
  const hold = (name: string, suspect: boolean) =>
    slots.run(suspect, async () => {
      order.push(name);
      await new Promise<void>((r) => gates.push(r));
    });
  const runs = [0, 1, 2, 3, 4, 5].map((i) => hold(`hang${i}`, true));
  await sleep(10);
  t.same(order, ["hang0", "hang1", "hang2"], "hanging suspects hold at most three slots");
  t.same(slots.queued, { healthy: 0, suspect: 3 });
  const healthy = [0, 1].map((i) => slots.run(false, async () => order.push(`ok${i}`)));
  await Promise.all(healthy);
  t.same(order.slice(3), ["ok0", "ok1"], "healthy checks run at once in the reserved slot");
  // a fourth suspect cannot take the free slot; when a suspect ends, the next suspect starts
  t.same(slots.queued, { healthy: 0, suspect: 3 });
  (gates.shift() as () => void)();
  await sleep(10);
  t.same(order.slice(5), ["hang3"], "suspects queue among themselves");
  // with healthy checks and suspects both waiting, the healthy one goes first
  const blockers = [0].map(() => hold("ok-slow", false));
  await sleep(10);
  const late = slots.run(false, async () => order.push("ok-late"));
  (gates.shift() as () => void)();
  await late;
  t.ok(
    order.includes("ok-late") && order.indexOf("ok-late") < order.indexOf("hang4"),
    `a waiting healthy check passes waiting suspects (${order.slice(6).join(", ")})`,
  );
  while (gates.length > 0) (gates.shift() as () => void)();
  await sleep(10);
  while (gates.length > 0) (gates.shift() as () => void)();
  await Promise.all([...runs, ...blockers]);
  t.same(slots.queued, { healthy: 0, suspect: 0 });
  t.equal(new ProbeSlots(1).suspectMax, 1, "a single slot is shared");
});

t.test("probe slots: a check waits for its origin's turn without holding a slot", async (t) => {
  const slots = new ProbeSlots(3, 2);
  const gates = new Map<string, () => void>();
  const started: string[] = [];
  const hold = (name: string, origin: string) =>
    slots.run(
      false,
      async () => {
        started.push(name);
        await new Promise<void>((r) => gates.set(name, r));
      },
      origin,
    );
  const a = ["a1", "a2", "a3", "a4"].map((n) => hold(n, "https://make.example"));
  await sleep(10);
  t.same(started, ["a1", "a2"], "two checks of one origin at once");
  t.equal(slots.inOrigin("https://make.example"), 2);
  const b = hold("b1", "https://n8n.example");
  await sleep(10);
  t.same(started, ["a1", "a2", "b1"], "another origin's check takes the free slot at once");
  t.same(slots.queued, { healthy: 0, suspect: 0 }, "the waiting checks of the busy origin hold no slot");
  gates.get("a1")?.();
  await sleep(10);
  t.same(started, ["a1", "a2", "b1", "a3"], "the origin's next check follows, first come first served");
  for (const n of ["a2", "b1", "a3"]) gates.get(n)?.();
  await sleep(10);
  gates.get("a4")?.();
  await Promise.all([...a, b]);
  t.same(started, ["a1", "a2", "b1", "a3", "a4"]);
  t.equal(slots.inOrigin("https://make.example"), 0, "nothing left behind");

  // a check that throws gives its origin's turn back
  const one = new ProbeSlots(2, 1);
  await t.rejects(
    one.run(false, async () => Promise.reject(new Error("boom")), "https://x.example"),
    /boom/,
  );
  t.equal(await one.run(false, async () => "next", "https://x.example"), "next");
});

t.test("probe slots: suspects never hold every turn of an origin", async (t) => {
  const slots = new ProbeSlots(100, 4);
  const gates: (() => void)[] = [];
  const started: string[] = [];
  const hold = (name: string, suspect: boolean) =>
    slots.run(
      suspect,
      async () => {
        started.push(name);
        await new Promise<void>((r) => gates.push(r));
      },
      "https://eu1.make.example",
    );
  const bad = [0, 1, 2, 3, 4].map((i) => hold(`bad${i}`, true));
  await sleep(10);
  t.same(started, ["bad0", "bad1", "bad2"], "three of the origin's four turns at most for suspects");
  const good = hold("good", false);
  await sleep(10);
  t.same(started.slice(3), ["good"], "a healthy check of the same host gets the kept turn at once");
  while (gates.length > 0) {
    (gates.shift() as () => void)();
    await sleep(5);
  }
  await Promise.all([...bad, good]);
  t.equal(started.length, 6);
  t.equal(slots.inOrigin("https://eu1.make.example"), 0);
});
