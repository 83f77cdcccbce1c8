import type { AddressInfo } from "node:net";
import pg from "pg";
import { SMTPServer } from "smtp-server";
import t, { type Test } from "tap";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { privateStores } from "../helpers/private-stores.js";
import { account, call, createConnection, type Env, serveReady, sleep, table } from "./lib.js";

/**
 * Vigil's own stores stop and come back under load. On a PostgreSQL cluster and a QuestDB of
 * the test's own (test/helpers/private-stores.ts: never the machine's shared servers), one
 * `vigil serve` with every role takes heartbeats from gateway daemons, usage batches, reads, and
 * probes simulator targets, while first PostgreSQL and then QuestDB is stopped for a few seconds
 * and started again. Checked:
 *
 * - while a store is down, requests that need it answer 503 with Retry-After, never a 500, and
 *   the process keeps answering (no connection refused);
 * - after the store is back, every kind of request succeeds again without restarting Vigil; the
 *   time that took is printed;
 * - no availability or missed_heartbeat incident is opened for a monitored connection because of
 *   Vigil's own outage (gateways here expect a heartbeat every 2 s with 3 s of grace, so a
 *   monitor that counts Vigil's outage against them would open one);
 * - every heartbeat the daemons sent is stored exactly once (they resend what got a 503);
 * - no e-mail is lost or sent twice: the PostgreSQL outage begins while an incident e-mail is
 *   being sent (the SMTP server holds the message until the stop has begun), and every e-mail in
 *   the outbox reaches the SMTP server exactly once and is marked sent.
 */
t.setTimeout(Number(process.env.FAULT_RESTART_TIMEOUT_S ?? 420) * 1000);

const DOWN_MS = Number(process.env.FAULT_DOWN_MS ?? 8_000);
/** Upper bound for recovery after a store is back; a failure past it is a stall. */
const RECOVERY_LIMIT_MS = 30_000;
const GATEWAYS = 3;
const HEALTHY_PROBES = 4;

interface Outcome {
  kind: string;
  at: number;
  status: number;
  retryAfter: string | null;
  error?: string;
}

interface Received {
  messageId: string;
  subject: string;
  at: number;
}

/** A local SMTP server recording each message by Message-ID; `hold` can delay an acceptance. */
async function smtpCapture(t: Test) {
  const received: Received[] = [];
  const control: { hold?: { subject: RegExp; until: () => Promise<void> } } = {};
  const server = new SMTPServer({
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, _session, callback) {
      let data = "";
      stream.on("data", (c: Buffer) => {
        data += c.toString();
      });
      stream.on("end", () => {
        const messageId = /^Message-ID:\s*(\S+)/im.exec(data)?.[1] ?? "";
        const subject = /^Subject:\s*(.*)$/im.exec(data)?.[1] ?? "";
        const hold = control.hold && control.hold.subject.test(subject) ? control.hold : undefined;
        if (hold) control.hold = undefined;
        void (hold ? hold.until() : Promise.resolve()).then(() => {
          received.push({ messageId, subject, at: Date.now() });
          callback();
        });
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return {
    url: `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`,
    received,
    control,
  };
}

t.test("PostgreSQL and QuestDB stop and come back under load", async (t) => {
  const stores = await privateStores(t, { postgres: true, questdb: true });
  if (!stores) return;
  const pgServer = stores.postgres as NonNullable<typeof stores.postgres>;
  const qdb = stores.questdb as NonNullable<typeof stores.questdb>;
  const testStart = Date.now();
  const smtp = await smtpCapture(t);
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  const flakySim = await startWorkflowA();
  t.teardown(() => flakySim.close());
  const simFault = (fault: string) => call(`${flakySim.url}/__sim/state`, { body: { fault } });

  const env: Env = {
    DATABASE_URL: pgServer.url,
    QUESTDB_URL: qdb.httpUrl,
    QUESTDB_PG_URL: qdb.pgUrl,
    VIGIL_SECRET: "store-restart-secret-store-restart-secret",
    SMTP_URL: smtp.url,
    MAIL_FROM: "Vigil <vigil@faults.example>",
    ALERT_FAILURE_MAIL_INTERVAL_SECONDS: "0",
    PROBE_TIMEOUT_MS: "3000",
    LOG_LEVEL: "warn",
  };
  const { key } = await account(t, env, "owner@faults.example");
  const server = await serveReady(t, env);
  const url = server.url;

  // What is monitored: healthy probe targets, one that will fail on purpose (its incident and
  // e-mail are expected), gateways with a short heartbeat deadline, a connection for usage.
  const healthy: string[] = [];
  for (let i = 0; i < HEALTHY_PROBES; i++)
    healthy.push(
      (
        await createConnection(url, key, {
          service_type: "workflow_a",
          service_name: `healthy-${i}`,
          base_url: sim.url,
          api_key: "sim-api-key",
          check_interval_seconds: 10,
        })
      ).id,
    );
  const flaky = (
    await createConnection(url, key, {
      service_type: "workflow_a",
      service_name: "flaky",
      base_url: flakySim.url,
      api_key: "sim-api-key",
      check_interval_seconds: 10,
      failure_threshold: 1,
    })
  ).id;
  const gateways: { id: string; key: string }[] = [];
  for (let i = 0; i < GATEWAYS; i++) {
    const c = await createConnection(url, key, {
      service_type: "gateway",
      service_name: `gateway-${i}`,
      heartbeat_interval_seconds: 2,
      heartbeat_grace_seconds: 3,
    });
    gateways.push({ id: c.id, key: c.ingestKey as string });
  }
  const usageConn = healthy[0] as string;

  const outcomes: Outcome[] = [];
  const record = async (kind: string, p: Promise<{ status: number; headers: Headers }>) => {
    const at = Date.now();
    try {
      const r = await p;
      outcomes.push({ kind, at, status: r.status, retryAfter: r.headers.get("retry-after") });
      return r;
    } catch (err) {
      outcomes.push({ kind, at, status: 0, retryAfter: null, error: (err as Error).message });
      return null;
    }
  };
  const wait = (r: { status: number; headers: Headers } | null, normal: number) => {
    if (r && r.status < 300) return normal;
    // a daemon honours Retry-After (at most 5 s here)
    const s = Number(r?.headers.get("retry-after") ?? 1);
    return Math.min(5, Number.isFinite(s) && s > 0 ? s : 1) * 1000;
  };

  let stopped = false;
  // Gateway daemons: a heartbeat for every second; what got no 201 is resent, oldest first.
  const sentPeriods = new Map(gateways.map((g) => [g.id, 0]));
  const daemons = gateways.map(async (g) => {
    const queue: unknown[] = [];
    let periodStart = Date.now();
    let nextBeat = Date.now() + 1000;
    for (;;) {
      if (Date.now() >= nextBeat && !stopped) {
        const end = Date.now();
        queue.push({
          type: "heartbeat",
          gateway: { status: "healthy", latencyMs: 5, version: "1" },
          tokens: {
            period: {
              inputTokens: 10,
              outputTokens: 1,
              startedAt: new Date(periodStart).toISOString(),
              endedAt: new Date(end).toISOString(),
            },
          },
        });
        sentPeriods.set(g.id, (sentPeriods.get(g.id) ?? 0) + 1);
        periodStart = end;
        nextBeat += 1000;
      }
      if (queue.length === 0) {
        if (stopped) return;
        await sleep(Math.max(0, nextBeat - Date.now()));
        continue;
      }
      const r = await record("heartbeat", call(`${url}/v1/gateway/ingest`, { key: g.key, body: queue[0] }));
      if (r?.status === 201) queue.shift();
      else await sleep(wait(r, 0));
    }
  });
  // Usage batches every 500 ms; a batch without a 201 is sent again.
  let usageSeq = 0;
  const usageLoop = (async () => {
    while (!stopped) {
      const batch = Array.from({ length: 5 }, (_, j) => ({
        connection_id: usageConn,
        entity: "restart",
        usage_amount: 1,
        metadata: { seq: usageSeq, j },
      }));
      const r = await record("usage", call(`${url}/v1/usage`, { key, body: batch }));
      if (r?.status === 201) usageSeq++;
      await sleep(r?.status === 201 ? 500 : Math.min(wait(r, 500), 1000));
    }
  })();
  // Reads of both stores, every 150 ms, round robin.
  const since = new Date(Date.now() - 3_600_000).toISOString();
  const reads: [string, string, string?][] = [
    ["read:connections", "/v1/connections"],
    ["read:incidents", "/v1/incidents"],
    ["read:usage", `/v1/usage?connection_id=${usageConn}`],
    ["read:totals", `/v1/usage?connection_id=${gateways[0]?.id}&start_date=${since}`, "PUT"],
    ["read:availability", `/v1/availability?connection_id=${healthy[1]}`],
  ];
  const readLoop = (async () => {
    for (let i = 0; !stopped; i++) {
      const [kind, path, method] = reads[i % reads.length] as [string, string, string?];
      await record(kind, call(`${url}${path}`, { key, method }));
      await sleep(150);
    }
  })();
  const readyLoop = (async () => {
    while (!stopped) {
      await record("readyz", call(`${url}/readyz`));
      await sleep(250);
    }
  })();

  /** The first answer below 300 of each kind at or after `from`. */
  const recoveredAt = (kind: string, from: number) =>
    outcomes.find((o) => o.kind === kind && o.at >= from && o.status > 0 && o.status < 300)?.at;
  const kinds = ["heartbeat", "usage", ...reads.map((r) => r[0]), "readyz"];
  const untilRecovered = async (from: number, needed: string[]) => {
    const deadline = from + RECOVERY_LIMIT_MS;
    while (Date.now() < deadline && needed.some((k) => recoveredAt(k, from) === undefined)) await sleep(100);
  };

  const windows: { store: string; stop: number; started: number; recovery: Record<string, number | null> }[] =
    [];

  // Steady state first: every probe target checked, heartbeats flowing.
  await sleep(12_000);

  // (a) PostgreSQL stops while an incident e-mail is being sent: the flaky target goes down, its
  // incident opens, and the SMTP server holds that e-mail until the stop has begun.
  let pgStop = 0;
  const pgStopped = new Promise<void>((resolve) => {
    smtp.control.hold = {
      subject: /flaky is down/,
      until: async () => {
        pgStop = Date.now();
        const stopping = pgServer.stop();
        await sleep(200); // the stop is under way: the e-mail is accepted while PostgreSQL goes down
        void stopping.then(() => resolve());
      },
    };
  });
  await simFault("down");
  const held = await Promise.race([pgStopped.then(() => true), sleep(40_000).then(() => false)]);
  if (!held) {
    // no e-mail came (should not happen): stop PostgreSQL anyway so the rest still runs
    t.fail("the flaky target's incident e-mail did not arrive within 40 s");
    smtp.control.hold = undefined;
    pgStop = Date.now();
    await pgServer.stop();
  }
  await sleep(Math.max(0, pgStop + DOWN_MS - Date.now()));
  await pgServer.start();
  const pgStarted = Date.now();
  await simFault("none");
  await untilRecovered(pgStarted, kinds);
  windows.push({
    store: "postgres",
    stop: pgStop,
    started: pgStarted,
    recovery: Object.fromEntries(kinds.map((k) => [k, (recoveredAt(k, pgStarted) ?? NaN) - pgStarted])),
  });
  t.equal(server.proc.exitCode, null, "Vigil kept running through the PostgreSQL outage");

  // Let the flaky target recover (two good checks resolve its incident) and things settle.
  await sleep(12_000);

  // (b) QuestDB stops and comes back.
  const qStop = Date.now();
  await qdb.stop();
  await sleep(Math.max(0, qStop + DOWN_MS - Date.now()));
  await qdb.start();
  const qStarted = Date.now();
  await untilRecovered(qStarted, kinds);
  windows.push({
    store: "questdb",
    stop: qStop,
    started: qStarted,
    recovery: Object.fromEntries(kinds.map((k) => [k, (recoveredAt(k, qStarted) ?? NaN) - qStarted])),
  });
  t.equal(server.proc.exitCode, null, "Vigil kept running through the QuestDB outage");

  // Past both outages: a whole heartbeat deadline and more than one probe interval.
  await sleep(12_000);
  stopped = true;
  await Promise.all([...daemons, usageLoop, readLoop, readyLoop]);

  // --- Answers: 2xx, or 503 with Retry-After while a store was down; nothing else, ever.
  const inOutage = (o: Outcome) =>
    windows.some((w) => o.at >= w.stop - 500 && o.at <= w.started + RECOVERY_LIMIT_MS);
  const bad = outcomes.filter((o) => !(o.status >= 200 && o.status < 300) && o.status !== 503);
  // what Vigil logged about them, so a failure says which statement and which error
  if (bad.length)
    t.comment(
      server
        .output()
        .split("\n")
        .filter((l) => /"level":50|"statusCode":500/.test(l))
        .slice(-20)
        .join("\n"),
    );
  t.same(
    bad.map((o) => `${o.kind} ${o.status}${o.error ? ` ${o.error}` : ""}`),
    [],
    "no answer other than 2xx or 503 (no 500, no refused connection)",
  );
  const unavailable = outcomes.filter((o) => o.status === 503);
  // /readyz is a probe for load balancers: its 503 names the store that is down
  const refused = unavailable.filter((o) => o.kind !== "readyz");
  t.same(
    [...new Set(refused.filter((o) => !o.retryAfter).map((o) => o.kind))],
    [],
    `every one of the ${refused.length} 503s of the API carries Retry-After`,
  );
  t.same(
    unavailable.filter((o) => !inOutage(o)).map((o) => `${o.kind} at ${new Date(o.at).toISOString()}`),
    [],
    "503 only while a store was down or coming back",
  );
  for (const w of windows) {
    const during = outcomes.filter((o) => o.at >= w.stop && o.at < w.started);
    t.ok(
      during.some((o) => o.status === 503),
      `${w.store} down: ${during.filter((o) => o.status === 503).length} of ${during.length} answers were 503`,
    );
    const slow = Object.entries(w.recovery).filter(([, ms]) => !Number.isFinite(ms));
    t.same(slow, [], `${w.store} back: every kind of request succeeds again without restarting Vigil`);
  }

  // --- Heartbeats: each period the daemons sent is stored once (they resent whatever got a 503).
  // QuestDB applies its WAL asynchronously: the last ones may take a moment to be visible.
  for (const g of gateways) {
    const stored = async () =>
      (
        await call<{ gateway: { heartbeats: number } | null }>(
          `${url}/v1/usage?connection_id=${g.id}&start_date=${since}`,
          { method: "PUT", key },
        )
      ).body.gateway?.heartbeats;
    const visibleBy = Date.now() + 20_000;
    let n = await stored();
    while (n !== sentPeriods.get(g.id) && Date.now() < visibleBy) {
      await sleep(250);
      n = await stored();
    }
    t.equal(n, sentPeriods.get(g.id), `gateway ${g.id}: every heartbeat stored once`);
  }

  // --- Incidents: only the flaky target's, none caused by Vigil's own outage.
  const db = new pg.Client({ connectionString: pgServer.url });
  await db.connect();
  t.teardown(() => db.end());
  const incidents = (
    await db.query<{ connection_id: string; kind: string; title: string; opened_at: Date }>(
      "SELECT connection_id, kind, title, opened_at FROM incidents ORDER BY opened_at",
    )
  ).rows;
  const falseIncidents = incidents.filter((i) => i.connection_id !== flaky);
  const rel = (ms: number) => `${((ms - testStart) / 1000).toFixed(1)} s`;
  t.same(
    falseIncidents.map((i) => `${i.kind}: ${i.title} (opened at ${rel(i.opened_at.getTime())})`),
    [],
    `no incident for a monitored connection that never failed (outages: ${windows
      .map((w) => `${w.store} ${rel(w.stop)} to ${rel(w.started)}`)
      .join(", ")})`,
  );
  t.ok(
    incidents.some((i) => i.connection_id === flaky && i.kind === "availability"),
    "the flaky target's own outage was detected",
  );
  const statuses = (
    await db.query<{ id: string; status: string }>("SELECT id, status FROM connections WHERE id <> $1", [
      flaky,
    ])
  ).rows;
  t.same(
    statuses.filter((s) => s.status !== "active"),
    [],
    "every other connection is still active",
  );

  // --- E-mail: every e-mail of the outbox reaches the SMTP server once and is marked sent.
  const outbox = async () =>
    (
      await db.query<{ id: string; status: string; subject: string; attempts: number }>(
        "SELECT id, status, subject, attempts FROM notifications WHERE channel = 'email' ORDER BY created_at",
      )
    ).rows;
  const drainBy = Date.now() + 20_000;
  let mails = await outbox();
  while (Date.now() < drainBy && mails.some((m) => !smtp.received.some((r) => r.messageId.includes(m.id)))) {
    await sleep(250);
    mails = await outbox();
  }
  await sleep(3_000); // a repeat, if there is one, has its chance to arrive
  mails = await outbox();
  const times = (id: string) => smtp.received.filter((r) => r.messageId.includes(id)).length;
  t.ok(mails.length >= 2, `${mails.length} e-mails in the outbox (the flaky target's failure and recovery)`);
  const lost = mails.filter((m) => times(m.id) === 0);
  if (lost.length) {
    // what the outbox says of each, so a failure shows whether it waited on a retry or was never tried
    const rows = await db.query<{
      subject: string;
      status: string;
      attempts: number;
      created_at: Date;
      next_attempt_at: Date;
      last_error: string | null;
    }>(
      "SELECT subject, status, attempts, created_at, next_attempt_at, last_error FROM notifications WHERE id = ANY($1)",
      [lost.map((m) => m.id)],
    );
    for (const r of rows.rows)
      t.comment(
        `not received: ${r.subject}: ${r.status}, ${r.attempts} attempts, created at ${rel(r.created_at.getTime())}, ` +
          `next attempt at ${rel(r.next_attempt_at.getTime())}, now ${rel(Date.now())}, last error ${r.last_error ?? "none"}; ` +
          `outages: ${windows.map((w) => `${w.store} ${rel(w.stop)} to ${rel(w.started)}`).join(", ")}`,
      );
    t.comment(
      server
        .output()
        .split("\n")
        .filter((l) => /deliver|mail|smtp|"level":[45]0/i.test(l))
        .slice(-15)
        .join("\n"),
    );
  }
  t.same(
    mails.filter((m) => times(m.id) === 0).map((m) => m.subject),
    [],
    "no e-mail lost: every e-mail of the outbox reached the SMTP server",
  );
  t.same(
    mails.filter((m) => times(m.id) > 1).map((m) => m.subject),
    [],
    "no e-mail sent twice",
  );
  t.same(
    smtp.received.filter((r) => !mails.some((m) => r.messageId.includes(m.id))).map((r) => r.subject),
    [],
    "nothing was sent that is not in the outbox",
  );
  // An e-mail the SMTP server accepted but the outbox does not mark sent goes out again once its
  // claim runs out (src/notifications/delivery.ts CLAIM_MS, 5 minutes): a repeat in waiting.
  const unmarked = mails.filter((m) => times(m.id) > 0 && m.status !== "sent");
  t.same(
    unmarked.map((m) => `${m.subject} (${m.status}, ${m.attempts} attempt(s))`),
    [],
    "every e-mail the SMTP server accepted is marked sent (else it is sent again when its claim runs out)",
  );
  // What that means: let such an e-mail's claim run out now instead of in 5 minutes, and see
  // whether it goes out a second time.
  let repeated = 0;
  if (unmarked.length > 0) {
    await db.query("UPDATE notifications SET next_attempt_at = now() WHERE id = ANY($1)", [
      unmarked.map((m) => m.id),
    ]);
    const by = Date.now() + 10_000;
    while (Date.now() < by && unmarked.some((m) => times(m.id) < 2)) await sleep(250);
    repeated = unmarked.filter((m) => times(m.id) > 1).length;
  }
  t.equal(repeated, 0, "no e-mail goes out again once its claim has run out");

  // --- The figures.
  const count = (f: (o: Outcome) => boolean) => outcomes.filter(f).length;
  const rows: (string | number)[][] = [
    ["outage", "down s", "answers", "503", "other non-2xx", ...kinds.map((k) => `${k} back ms`)],
  ];
  for (const w of windows) {
    const during = (o: Outcome) => o.at >= w.stop && o.at <= w.started + RECOVERY_LIMIT_MS;
    rows.push([
      w.store,
      Math.round((w.started - w.stop) / 100) / 10,
      count(during),
      count((o) => during(o) && o.status === 503),
      count((o) => during(o) && o.status !== 503 && !(o.status >= 200 && o.status < 300)),
      ...kinds.map((k) =>
        Number.isFinite(w.recovery[k]) ? Math.max(0, Math.round(w.recovery[k] as number)) : "never",
      ),
    ]);
  }
  t.comment(
    `store outages under load: ${outcomes.length} answers in all, ${unavailable.length} of them 503; ` +
      `${incidents.length} incident(s), ${falseIncidents.length} false; ${mails.length} e-mail(s), ` +
      `${smtp.received.length} received, ${unmarked.length} accepted but not marked sent, ` +
      `${repeated} sent again once its claim ran out\n${table(rows)}`,
  );
  server.proc.kill("SIGTERM");
  await server.exited();
});
