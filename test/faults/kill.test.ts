import pg from "pg";
import t, { type Test } from "tap";
import {
  freshDatabaseUrl,
  requireBackend,
  TEST_QUESTDB_PG_URL,
  TEST_QUESTDB_URL,
} from "../helpers/backends.js";
import {
  account,
  call,
  createConnection,
  type Env,
  questdbApplied,
  quantile,
  serveReady,
  sleep,
  table,
} from "./lib.js";

/**
 * kill -9 during ingest, measured. Each trial sends heartbeats and usage batches concurrently to
 * a `vigil serve` (they share its group commits), kills it with SIGKILL at a random moment within
 * a few hundred ms, starts a new process on the same stores and resends: every heartbeat attempted
 * (acknowledged or not, as a daemon retries) and every usage batch that got no answer (as a client
 * retries). A trial counts for heartbeat (usage) ingest when heartbeat (usage) requests were in
 * flight at the kill; trials run until each kind has FAULT_KILL_TRIALS of them. Checked, in the
 * store itself before the resend and through the API after it:
 *
 * - lost: an acknowledged heartbeat or usage entry that is not stored (must be 0);
 * - duplicated: a row stored twice under one key (must be 0), or a total that counts one twice;
 * - torn: an acknowledged heartbeat without all its per-model rows, or a usage batch stored in
 *   part (must be 0: a batch is all or nothing);
 * - after the resend, every heartbeat attempted is stored exactly once and PUT /v1/usage counts
 *   each once; usage totals equal the entries stored;
 * - committed-unacked: writes committed whose answer the kill cut off. The resend must not store
 *   them twice: heartbeats carry their own id (their period); usage batches are sent with an
 *   Idempotency-Key, as a client that retries should, and resent with the same key
 *   (resend-dups: batches stored twice after the resend, must be 0).
 *
 * Runs on PostgreSQL alone (series on the `sql` backend) and on PostgreSQL + QuestDB, one
 * database per backend for all trials, distinct connections per trial. FAULT_KILL_TRIALS (default
 * 20) sets the trials per backend and kind. A summary table is printed at the end.
 */
const TRIALS = Math.max(1, Number(process.env.FAULT_KILL_TRIALS ?? 20));
/** The kill lands uniformly within this many ms after the first write is acknowledged. */
const LOAD_MS = 400;
const GATEWAYS_PER_TRIAL = 3;
const USAGE_WORKERS = 3;
const USAGE_BATCH = 10;
const MODELS = [
  { model: "kill-model-a", inputTokens: 60, outputTokens: 6, estimatedCostUsd: 0.0006 },
  { model: "kill-model-b", inputTokens: 40, outputTokens: 4, estimatedCostUsd: 0.0004 },
];

t.setTimeout(Number(process.env.FAULT_KILL_TIMEOUT_S ?? 900) * 1000);

type Backend = "sql" | "questdb";
type Kind = "heartbeat" | "usage";

interface TrialResult {
  backend: Backend;
  kind: Kind;
  trial: number;
  killAfterMs: number;
  /** Requests of this kind sent and not answered when the kill was sent. */
  inFlightAtKill: number;
  attempted: number;
  acked: number;
  lost: number;
  duplicated: number;
  /** Acknowledged heartbeats missing a per-model row. */
  tornAcked: number;
  /** Writes committed whose answer never came (the kill fell between commit and answer). */
  committedUnacked: number;
  /** Unacknowledged usage batches stored in part (a batch is all or nothing). */
  tornUnacked: number;
  /** Usage batches stored more than once after the client's resend (same Idempotency-Key). */
  resendDuplicates: number;
  /** Answers other than 201/503 during the load, and failed resends. */
  unexpected: number;
  restartMs: number;
  /** After the resend: every heartbeat once, totals exact. */
  exactAfter: boolean;
}
const results: TrialResult[] = [];

/** Direct reads of the series store, to see what is stored without the API in between. */
function storeReader(t: Test, backend: Backend, databaseUrl: string) {
  const pool = new pg.Pool({
    connectionString: backend === "questdb" ? (TEST_QUESTDB_PG_URL as string) : databaseUrl,
    max: 2,
  });
  pool.on("error", () => {});
  t.teardown(() => pool.end());
  const list = (n: number, from: number) => Array.from({ length: n }, (_, i) => `$${i + from}`).join(", ");
  return {
    /** Every write acknowledged so far is visible (QuestDB applies its WAL asynchronously). */
    settle: () =>
      backend === "questdb"
        ? questdbApplied(pool, ["gateway_heartbeats", "gateway_model_usage", "usage_entries"])
        : Promise.resolve(),
    /** Rows per `${connection}/${heartbeat}` (and per `${connection}/${heartbeat}/${model}`). */
    async heartbeats(connections: string[], since: Date) {
      const params = [since.toISOString(), ...connections];
      const where = `ts >= $1 AND connection_id IN (${list(connections.length, 2)})`;
      const hb = await pool.query(
        `SELECT connection_id, heartbeat_id, count(*) AS n FROM gateway_heartbeats WHERE ${where} GROUP BY connection_id, heartbeat_id`,
        params,
      );
      const models = await pool.query(
        `SELECT connection_id, heartbeat_id, model, count(*) AS n FROM gateway_model_usage WHERE ${where} GROUP BY connection_id, heartbeat_id, model`,
        params,
      );
      return {
        heartbeats: new Map<string, number>(
          hb.rows.map((r) => [`${r.connection_id}/${r.heartbeat_id}`, Number(r.n)]),
        ),
        models: new Map<string, number>(
          models.rows.map((r) => [`${r.connection_id}/${r.heartbeat_id}/${r.model}`, Number(r.n)]),
        ),
      };
    },
    /** Usage rows of one connection: id, rows under that id, and the batch seq from the metadata. */
    async usage(connection: string, since: Date) {
      const r = await pool.query(
        "SELECT id, metadata, usage_amount FROM usage_entries WHERE ts >= $1 AND connection_id = $2",
        [since.toISOString(), connection],
      );
      return r.rows.map((row) => ({
        id: row.id as string,
        seq: (JSON.parse(row.metadata as string) as { seq: number }).seq,
        amount: Number(row.usage_amount),
      }));
    },
  };
}
type Reader = ReturnType<typeof storeReader>;

interface Suite {
  t: Test;
  backend: Backend;
  env: Env;
  key: string;
  reader: Reader;
  /** Connections of the warm-up, outside every trial's accounting. */
  warm: { gateway: { id: string; key: string }; workflow: string };
}

let warmSeq = 0;
/**
 * A fresh process answers its first requests slowly (modules load, code is compiled), so a kill
 * within a few hundred ms would mostly meet requests not yet started. Each trial first sends a
 * few heartbeats and usage batches to connections outside the accounting.
 */
async function warmUp(s: Suite, url: string) {
  const base = Date.now() - 20 * 3_600_000;
  await Promise.all([
    (async () => {
      for (let i = 0; i < 8; i++) {
        const n = warmSeq++;
        await call(`${url}/v1/gateway/ingest`, {
          key: s.warm.gateway.key,
          body: {
            type: "heartbeat",
            gateway: { status: "healthy", latencyMs: 1, version: "1" },
            tokens: {
              period: {
                inputTokens: 1,
                outputTokens: 1,
                startedAt: iso(base + n * 1000),
                endedAt: iso(base + n * 1000 + 1000),
              },
              byModel: MODELS,
            },
          },
        });
      }
    })(),
    (async () => {
      for (let i = 0; i < 4; i++)
        await call(`${url}/v1/usage`, {
          key: s.key,
          body: Array.from({ length: USAGE_BATCH }, () => ({
            connection_id: s.warm.workflow,
            entity: "warm",
            usage_amount: 1,
          })),
        });
    })(),
  ]);
}

const iso = (ms: number) => new Date(ms).toISOString();

/** Resolves when `f` is true (polled), or after `ms`. */
async function until(f: () => boolean, ms: number) {
  const deadline = Date.now() + ms;
  while (!f() && Date.now() < deadline) await sleep(5);
}

type Server = Awaited<ReturnType<typeof serveReady>>;

/** Heartbeats from fresh gateways, two in flight per gateway, until stopped. */
function heartbeatLoad(url: string, gateways: { id: string; key: string }[], base: number) {
  const attempted = new Map(gateways.map((g) => [g.id, new Set<number>()]));
  const acked = new Map(gateways.map((g) => [g.id, new Set<number>()]));
  const load = { stop: false, inFlight: 0, unexpected: 0, attempted, acked, loops: [] as Promise<void>[] };
  load.loops = gateways.flatMap((g) => {
    let next = 0;
    const worker = async () => {
      while (!load.stop) {
        const i = next++;
        attempted.get(g.id)?.add(i);
        load.inFlight++;
        try {
          const r = await call(`${url}/v1/gateway/ingest`, { key: g.key, body: heartbeat(base, i) });
          if (r.status === 201) acked.get(g.id)?.add(i);
          else if (r.status !== 503) load.unexpected++;
        } catch {
          return; // the server is gone
        } finally {
          load.inFlight--;
        }
      }
    };
    return [worker(), worker()];
  });
  return load;
}

const heartbeat = (base: number, i: number) => ({
  type: "heartbeat",
  gateway: { status: "healthy", latencyMs: 3, version: "1" },
  tokens: {
    period: {
      inputTokens: 100,
      outputTokens: 10,
      requestCount: 1,
      estimatedCostUsd: 0.001,
      startedAt: iso(base + i * 1000),
      endedAt: iso(base + (i + 1) * 1000),
    },
    byModel: MODELS,
  },
});

/** The Idempotency-Key of one usage batch: the same on the first send and the resend. */
const idempotencyKey = (s: Suite, trial: number, seq: number) => `kill-${s.backend}-${trial}-${seq}`;

interface Batch {
  seq: number;
  entries: Record<string, unknown>[];
  acked: string[] | null;
}

/** Usage batches of USAGE_BATCH entries, USAGE_WORKERS in flight, until stopped. */
function usageLoad(s: Suite, url: string, connectionId: string, trial: number) {
  const load = {
    stop: false,
    inFlight: 0,
    unexpected: 0,
    batches: [] as Batch[],
    loops: [] as Promise<void>[],
  };
  let nextSeq = 0;
  load.loops = Array.from({ length: USAGE_WORKERS }, async () => {
    while (!load.stop) {
      const seq = nextSeq++;
      const b: Batch = {
        seq,
        entries: Array.from({ length: USAGE_BATCH }, (_, j) => ({
          connection_id: connectionId,
          entity: `kill-${trial}`,
          usage_amount: j + 1,
          cost_cents: 1,
          metadata: { seq, j },
        })),
        acked: null,
      };
      load.batches.push(b);
      load.inFlight++;
      try {
        const r = await call<{ usage: { id: string }[] }>(`${url}/v1/usage`, {
          key: s.key,
          body: b.entries,
          headers: { "idempotency-key": idempotencyKey(s, trial, seq) },
        });
        if (r.status === 201) b.acked = r.body.usage.map((u) => u.id);
        else if (r.status !== 503) load.unexpected++;
      } catch {
        return;
      } finally {
        load.inFlight--;
      }
    }
  });
  return load;
}

/**
 * One trial: load, kill -9 at a random moment within LOAD_MS of the first acknowledged write of
 * each kind, restart, check the store, resend, check again. Returns the new server.
 */
async function trial(s: Suite, server: Server, n: number): Promise<Server> {
  await warmUp(s, server.url);
  const gateways: { id: string; key: string }[] = [];
  for (let g = 0; g < GATEWAYS_PER_TRIAL; g++) {
    const c = await createConnection(server.url, s.key, {
      service_type: "gateway",
      service_name: `k${n}-${g}`,
    });
    gateways.push({ id: c.id, key: c.ingestKey as string });
  }
  const wf = await createConnection(server.url, s.key, {
    service_type: "workflow_a",
    service_name: `k${n}-wf`,
    base_url: "http://127.0.0.1:1",
    api_key: "k",
  });
  const base = Date.now() - 6 * 3_600_000;
  const since = new Date(base - 60_000);
  const usageSince = new Date(Date.now() - 60_000);

  const start = Date.now();
  const hb = heartbeatLoad(server.url, gateways, base);
  const us = usageLoad(s, server.url, wf.id, n);
  await until(() => [...hb.acked.values()].some((a) => a.size > 0) && us.batches.some((b) => b.acked), 3_000);
  await sleep(Math.random() * LOAD_MS);
  const inFlight = { heartbeat: hb.inFlight, usage: us.inFlight };
  server.proc.kill("SIGKILL");
  const killAfterMs = Date.now() - start;
  hb.stop = true;
  us.stop = true;
  await Promise.all([...hb.loops, ...us.loops]);
  await server.exited();

  const next = await serveReady(s.t, s.env, ["--roles", "api"]);
  // What the store holds before anything is resent.
  await s.reader.settle();
  const ids = gateways.map((g) => g.id);
  const hbBefore = await s.reader.heartbeats(ids, since);
  const usBefore = await s.reader.usage(wf.id, usageSince);

  // Resend every heartbeat attempted, as a daemon does after an outage (its id is its period's),
  // and every usage batch that got no answer, as a client does (it cannot know which of those
  // were committed).
  const idOf = new Map<string, string>();
  let resendFailures = 0;
  await Promise.all(
    gateways.map(async (g) => {
      for (const i of hb.attempted.get(g.id) ?? []) {
        const r = await call<{ heartbeat_id: string }>(`${next.url}/v1/gateway/ingest`, {
          key: g.key,
          body: heartbeat(base, i),
        });
        if (r.status === 201) idOf.set(`${g.id}/${i}`, r.body.heartbeat_id);
        else resendFailures++;
      }
    }),
  );
  const unackedBatches = us.batches.filter((b) => !b.acked);
  for (const b of unackedBatches) {
    const r = await call(`${next.url}/v1/usage`, {
      key: s.key,
      body: b.entries,
      headers: { "idempotency-key": idempotencyKey(s, n, b.seq) },
    });
    if (r.status !== 201) resendFailures++;
  }

  // --- heartbeats, before the resend
  let lost = 0;
  let duplicated = 0;
  let tornAcked = 0;
  let committedUnacked = 0;
  const attemptedKeys = new Set<string>();
  for (const g of gateways)
    for (const i of hb.attempted.get(g.id) ?? []) {
      const key = `${g.id}/${idOf.get(`${g.id}/${i}`)}`;
      attemptedKeys.add(key);
      const stored = hbBefore.heartbeats.get(key) ?? 0;
      if (hb.acked.get(g.id)?.has(i)) {
        if (stored === 0) lost++;
        if (MODELS.some((m) => (hbBefore.models.get(`${key}/${m.model}`) ?? 0) === 0)) tornAcked++;
      } else if (stored > 0) committedUnacked++;
    }
  for (const [key, rows] of hbBefore.heartbeats) {
    if (rows > 1) duplicated++;
    if (!attemptedKeys.has(key)) duplicated++; // a row nobody sent counts against exactly-once too
  }
  for (const rows of hbBefore.models.values()) if (rows > 1) duplicated++;
  // --- heartbeats, after it: each attempted one stored once, one row per model, counted once
  await s.reader.settle();
  const hbAfter = await s.reader.heartbeats(ids, since);
  let hbExact = hbAfter.heartbeats.size === attemptedKeys.size;
  for (const key of attemptedKeys) {
    if (hbAfter.heartbeats.get(key) !== 1) hbExact = false;
    for (const m of MODELS) if (hbAfter.models.get(`${key}/${m.model}`) !== 1) hbExact = false;
  }
  for (const g of gateways) {
    const sent = hb.attempted.get(g.id)?.size ?? 0;
    const r = await call<{
      gateway: {
        heartbeats: number;
        input_tokens: number;
        by_model: { model: string; input_tokens: number }[];
      } | null;
    }>(`${next.url}/v1/usage?connection_id=${g.id}&start_date=${since.toISOString()}`, {
      method: "PUT",
      key: s.key,
    });
    const gw = r.body.gateway;
    const ok =
      r.status === 200 &&
      (gw?.heartbeats ?? 0) === sent &&
      (gw?.input_tokens ?? 0) === sent * 100 &&
      MODELS.every(
        (m) => (gw?.by_model.find((b) => b.model === m.model)?.input_tokens ?? 0) === sent * m.inputTokens,
      );
    if (!ok) {
      hbExact = false;
      s.t.comment(
        `trial ${n}: totals of gateway ${g.id} after the resend: ${JSON.stringify(r.body)}; sent ${sent}`,
      );
    }
  }
  const size = (m: Map<string, Set<number>>) => [...m.values()].reduce((a, v) => a + v.size, 0);
  results.push({
    backend: s.backend,
    kind: "heartbeat",
    trial: n,
    killAfterMs,
    inFlightAtKill: inFlight.heartbeat,
    attempted: size(hb.attempted),
    acked: size(hb.acked),
    lost,
    duplicated,
    tornAcked,
    committedUnacked,
    tornUnacked: 0,
    resendDuplicates: 0,
    unexpected: hb.unexpected + resendFailures,
    restartMs: next.startedMs,
    exactAfter: hbExact,
  });

  // --- usage, before the resend: acknowledged entries once each; a batch is all or nothing
  const rowsPerId = new Map<string, number>();
  const rowsPerSeq = new Map<number, number>();
  for (const r of usBefore) {
    rowsPerId.set(r.id, (rowsPerId.get(r.id) ?? 0) + 1);
    rowsPerSeq.set(r.seq, (rowsPerSeq.get(r.seq) ?? 0) + 1);
  }
  let uLost = 0;
  let uDuplicated = 0;
  let uCommittedUnacked = 0;
  let tornUnacked = 0;
  for (const rows of rowsPerId.values()) if (rows > 1) uDuplicated++;
  for (const b of us.batches) {
    const stored = rowsPerSeq.get(b.seq) ?? 0;
    if (b.acked) {
      for (const id of b.acked) if (!rowsPerId.has(id)) uLost++;
      if (stored > USAGE_BATCH) uDuplicated++;
    } else if (stored === USAGE_BATCH) uCommittedUnacked++;
    else if (stored !== 0) tornUnacked++;
  }
  // --- usage, after it: totals count every stored entry once
  await s.reader.settle();
  const usAfter = await s.reader.usage(wf.id, usageSince);
  const distinct = new Set(usAfter.map((r) => r.id));
  const totals = await call<{ totals: { entries: number }; by_unit: { amount: number }[] }>(
    `${next.url}/v1/usage?connection_id=${wf.id}&start_date=${usageSince.toISOString()}`,
    { method: "PUT", key: s.key },
  );
  const amount = usAfter.reduce((a, row) => a + row.amount, 0);
  const rowsPerSeqAfter = new Map<number, number>();
  for (const r of usAfter) rowsPerSeqAfter.set(r.seq, (rowsPerSeqAfter.get(r.seq) ?? 0) + 1);
  const resendDuplicates = [...rowsPerSeqAfter.values()].filter((rows) => rows > USAGE_BATCH).length;
  const usExact =
    us.batches.every((b) => rowsPerSeqAfter.get(b.seq) === USAGE_BATCH) &&
    distinct.size === usAfter.length &&
    totals.status === 200 &&
    totals.body.totals.entries === usAfter.length &&
    totals.body.by_unit.reduce((a, u) => a + u.amount, 0) === amount;
  if (!usExact)
    s.t.comment(
      `trial ${n}: usage totals ${JSON.stringify(totals.body)}; ${usAfter.length} rows, ${distinct.size} ids`,
    );
  results.push({
    backend: s.backend,
    kind: "usage",
    trial: n,
    killAfterMs,
    inFlightAtKill: inFlight.usage,
    attempted: us.batches.length * USAGE_BATCH,
    acked: us.batches.filter((b) => b.acked).length * USAGE_BATCH,
    lost: uLost,
    duplicated: uDuplicated,
    tornAcked: 0,
    committedUnacked: uCommittedUnacked,
    tornUnacked,
    resendDuplicates,
    unexpected: us.unexpected,
    restartMs: next.startedMs,
    exactAfter: usExact,
  });
  return next;
}

async function suite(t: Test, backend: Backend) {
  if (!(await requireBackend(t, "postgres"))) return;
  if (backend === "questdb" && !(await requireBackend(t, "questdb"))) return;
  const databaseUrl = await freshDatabaseUrl(t);
  const env: Env = {
    DATABASE_URL: databaseUrl,
    VIGIL_SECRET: "kill-test-secret-kill-test-secret-000001",
    LOG_LEVEL: "warn",
  };
  if (backend === "questdb") {
    env.QUESTDB_URL = TEST_QUESTDB_URL as string;
    env.QUESTDB_PG_URL = TEST_QUESTDB_PG_URL as string;
  }
  const { key } = await account(t, env, `kill-${backend}@x.example`);
  let server = await serveReady(t, env, ["--roles", "api"]);
  const gw = await createConnection(server.url, key, { service_type: "gateway", service_name: "warm-up" });
  const wf = await createConnection(server.url, key, {
    service_type: "workflow_a",
    service_name: "warm-up",
    base_url: "http://127.0.0.1:1",
    api_key: "k",
  });
  const s: Suite = {
    t,
    backend,
    env,
    key,
    reader: storeReader(t, backend, databaseUrl),
    warm: { gateway: { id: gw.id, key: gw.ingestKey as string }, workflow: wf.id },
  };
  // Trials until each kind has TRIALS in which its requests were in flight at the kill.
  const counted = (kind: Kind) =>
    results.filter((r) => r.backend === backend && r.kind === kind && r.inFlightAtKill > 0).length;
  for (let n = 0; counted("heartbeat") < TRIALS || counted("usage") < TRIALS; n++) {
    if (n >= 2 * TRIALS) {
      t.fail(
        `only ${counted("heartbeat")} heartbeat and ${counted("usage")} usage trials met requests in flight`,
      );
      break;
    }
    server = await trial(s, server, n);
    for (const r of results.filter((x) => x.backend === backend && x.trial === n)) {
      const label =
        `${backend} trial ${n}, ${r.kind}: kill after ${r.killAfterMs} ms with ${r.inFlightAtKill} in flight, ` +
        `${r.acked}/${r.attempted} acked, ${r.committedUnacked} committed without an answer`;
      if (r.lost || r.duplicated || r.tornAcked || r.tornUnacked || r.unexpected || !r.exactAfter)
        t.fail(`${label}: ${JSON.stringify(r)}`);
      else t.pass(label);
    }
  }
  // A batch committed just before the kill, whose answer was lost, is resent by the client with
  // its Idempotency-Key: stored once.
  const resendDups = results
    .filter((r) => r.backend === backend && r.kind === "usage")
    .reduce((a, r) => a + r.resendDuplicates, 0);
  t.equal(resendDups, 0, "no usage batch stored twice by a client's resend after a lost answer");
  server.proc.kill("SIGTERM");
  await server.exited();
}

t.test("SIGKILL during ingest on PostgreSQL (series on the sql backend)", (t) => suite(t, "sql"));
t.test("SIGKILL during ingest on PostgreSQL + QuestDB", (t) => suite(t, "questdb"));

t.teardown(() => {
  if (results.length === 0) return;
  const rows: (string | number)[][] = [
    [
      "backend",
      "kind",
      "trials",
      "in flight",
      "attempted",
      "acked",
      "lost",
      "duplicated",
      "torn",
      "committed-unacked",
      "resend-dups",
      "restart p50 ms",
    ],
  ];
  for (const backend of ["sql", "questdb"] as Backend[])
    for (const kind of ["heartbeat", "usage"] as Kind[]) {
      const rs = results.filter((r) => r.backend === backend && r.kind === kind);
      if (rs.length === 0) continue;
      const sum = (f: (r: TrialResult) => number) => rs.reduce((a, r) => a + f(r), 0);
      rows.push([
        backend === "sql" ? "postgres" : "postgres+questdb",
        kind,
        rs.filter((r) => r.inFlightAtKill > 0).length,
        sum((r) => r.inFlightAtKill),
        sum((r) => r.attempted),
        sum((r) => r.acked),
        sum((r) => r.lost),
        sum((r) => r.duplicated),
        sum((r) => r.tornAcked + r.tornUnacked),
        sum((r) => r.committedUnacked),
        sum((r) => r.resendDuplicates),
        quantile(
          rs.map((r) => r.restartMs),
          0.5,
        ),
      ]);
    }
  const text =
    "kill -9 during ingest: trials with requests of the kind in flight at the kill, and how many were;\n" +
    "lost/duplicated/torn must be 0; committed-unacked: writes committed whose answer the kill cut off;\n" +
    "resend-dups: of those, usage batches that the client's resend stored a second time\n" +
    table(rows);
  process.stdout.write(`${text.replace(/^/gm, "# ")}\n`);
});
