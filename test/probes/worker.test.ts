import t, { type Test } from "tap";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

const fault = (url: string, f: string) =>
  fetch(`${url}/__sim/state`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fault: f }),
  });

async function connectionTo(ta: TestApp, key: string, simUrl: string, apiKey = "sim-api-key", org?: string) {
  const r = await call(ta.app, key, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "sim n8n",
    base_url: simUrl,
    api_key: apiKey,
    ...(org ? { organization_id: org } : {}),
  });
  return r.json().connection.id as string;
}

/** Runs one scheduling slot: makes the connection due, lets the worker claim and check it. */
async function slot(ta: TestApp, worker: ProbeWorker, id: string) {
  await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now() WHERE id = $1", [id]);
  await worker.tick();
  await worker.idle();
}

const state = async (ta: TestApp, id: string) =>
  (
    await ta.ctx.stores.db.query<{ status: string; failures: number }>(
      "SELECT status, consecutive_failures AS failures FROM connections WHERE id = $1",
      [id],
    )
  ).rows[0];

t.test("checks, status moves and one availability incident per failing run", async (t: Test) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 300 });
  t.teardown(() => worker.stop());
  await worker.tick(); // the seeded connections (pointing nowhere) get their first check out of the way
  await worker.idle();

  const lastCheck = async (cid: string) =>
    (
      await ta.ctx.stores.db.query<{ last: Date | null; next: Date }>(
        "SELECT last_check_at AS last, next_check_at AS next FROM connections WHERE id = $1",
        [cid],
      )
    ).rows[0];
  const id = await connectionTo(ta, w.keys.alicePersonal, sim.url);
  t.equal((await state(ta, id))?.status, "inactive");
  // a new connection is due at once: the next tick checks it
  await worker.tick();
  await worker.idle();
  t.ok((await lastCheck(id))?.last, "checked on the first tick after creation");
  t.equal((await state(ta, id))?.status, "active", "first successful check: active");
  t.ok(((await lastCheck(id))?.next.getTime() ?? 0) > Date.now(), "next check in a later slot");

  await fault(sim.url, "down");
  await slot(ta, worker, id);
  t.same(await state(ta, id), { status: "active", failures: 1 }, "a single failed check changes nothing");
  const incidents = () =>
    ta.ctx.stores.db.query<{ id: string; status: string }>(
      "SELECT id, status FROM incidents WHERE connection_id = $1",
      [id],
    );
  t.equal((await incidents()).rows.length, 0, "and never alerts");
  await slot(ta, worker, id);
  await slot(ta, worker, id);
  t.same(await state(ta, id), { status: "error", failures: 3 }, "a run of 3 failures: error");
  t.same(
    (await incidents()).rows.map((r) => r.status),
    ["open"],
    "one incident opened",
  );
  await slot(ta, worker, id);
  t.equal((await incidents()).rows.length, 1, "never two open for one connection");

  const incidentId = (await incidents()).rows[0]?.id;
  const mails = await ta.ctx.stores.db.query<{ kind: string; recipient: string; subject: string }>(
    "SELECT kind, recipient, subject FROM notifications WHERE incident_id = $1 ORDER BY created_at",
    [incidentId],
  );
  t.same(
    mails.rows.map((m) => [m.kind, m.recipient]),
    [["failure", "alice@a.example"]],
    "one failure e-mail to the owner, via the outbox",
  );
  t.match(mails.rows[0]?.subject, /sim n8n is down/);

  await fault(sim.url, "none");
  await slot(ta, worker, id);
  t.equal((await state(ta, id))?.status, "active", "error -> active on recovery");
  t.same(
    (await incidents()).rows.map((r) => r.status),
    ["open"],
    "one success does not resolve",
  );
  await slot(ta, worker, id);
  t.same(
    (await incidents()).rows.map((r) => r.status),
    ["resolved"],
    "two consecutive successes resolve it",
  );
  const events = await ta.ctx.stores.db.query<{ kind: string }>(
    "SELECT kind FROM incident_events WHERE incident_id = $1 ORDER BY at, kind",
    [incidentId],
  );
  t.same(
    events.rows.map((e) => e.kind).sort(),
    ["notified", "notified", "opened", "resolved"],
    "the timeline",
  );
  const recovery = await ta.ctx.stores.db.query<{ kind: string }>(
    "SELECT kind FROM notifications WHERE incident_id = $1 AND kind = 'recovery'",
    [incidentId],
  );
  t.equal(recovery.rows.length, 1, "one recovery e-mail");

  await ta.ctx.stores.series.waitVisible();
  const samples = await ta.ctx.stores.series.page(availabilitySamples, {
    where: [{ column: "connection_id", op: "eq", value: id }],
    limit: 20,
  });
  t.equal(samples.rows.length, 7, "every check stored a sample");
  t.same(
    samples.rows.filter((s) => !s.available).map((s) => s.reason),
    ["http_status", "http_status", "http_status", "http_status"],
  );

  // bad credentials: error at once
  const bad = await connectionTo(ta, w.keys.alicePersonal, sim.url, "wrong-key");
  await worker.tick();
  await worker.idle();
  t.same(await state(ta, bad), { status: "error", failures: 1 }, "bad credentials: error at once");

  // an organization connection alerts the organization's owners and admins
  const orgConn = await connectionTo(ta, w.keys.davePersonal, sim.url, "sim-api-key", w.orgs.orgA.id);
  await fault(sim.url, "down");
  for (let i = 0; i < 3; i++) await slot(ta, worker, orgConn);
  const orgMails = await ta.ctx.stores.db.query<{ recipient: string }>(
    "SELECT recipient FROM notifications WHERE connection_id = $1",
    [orgConn],
  );
  t.same(
    orgMails.rows.map((m) => m.recipient),
    ["alice@a.example"],
    "owners and admins, not plain members",
  );

  // editing the address makes the connection due again at once
  const before = (await lastCheck(id))?.last?.getTime() ?? 0;
  await call(ta.app, w.keys.alicePersonal, "PUT", `/v1/connections/${id}`, { base_url: sim.url });
  await worker.tick();
  await worker.idle();
  t.ok(((await lastCheck(id))?.last?.getTime() ?? 0) > before, "an edited connection is checked right away");
});

t.test(
  "two workers on one Postgres share the connections; a dead worker's leases are taken over",
  async (t: Test) => {
    if (!(await requireBackend(t, "postgres"))) return;
    const ta = await testApp(t, { relational: "postgres" });
    const w = await seedTenants(ta);
    const sim = await startWorkflowA({ latencyMs: 20 });
    t.teardown(() => sim.close());
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push(await connectionTo(ta, w.keys.alicePersonal, sim.url));
    const a = new ProbeWorker(ta.ctx, { workerId: "worker-a", timeoutMs: 2000 });
    const b = new ProbeWorker(ta.ctx, { workerId: "worker-b", timeoutMs: 2000 });
    t.teardown(async () => {
      await a.stop();
      await b.stop();
    });
    const [na, nb] = await Promise.all([a.tick(), b.tick()]);
    await Promise.all([a.idle(), b.idle()]);
    // 40 new connections plus the 4 seeded non-gateway ones
    t.equal(na + nb, 44, `all due connections claimed once between them (a ${na}, b ${nb})`);
    await ta.ctx.stores.series.waitVisible();
    const counts = await ta.ctx.stores.series.aggregate(availabilitySamples, {
      bucket: "all",
      where: [{ column: "connection_id", op: "in", value: ids }],
      groupBy: ["connection_id"],
      measures: { n: { fn: "count" } },
    });
    t.equal(counts.length, 40);
    t.ok(
      counts.every((c) => c.n === 1),
      "no connection checked twice in the slot",
    );

    // a worker that claimed and died: its lease runs out, then another worker takes the connection
    await ta.ctx.stores.db.query(
      "UPDATE connections SET next_check_at = now(), lease_owner = 'dead-worker', lease_until = now() + interval '1 second' WHERE id = $1",
      [ids[0]],
    );
    const owner = async () =>
      (
        await ta.ctx.stores.db.query<{ owner: string | null; last: Date }>(
          "SELECT lease_owner AS owner, last_check_at AS last FROM connections WHERE id = $1",
          [ids[0]],
        )
      ).rows[0];
    const checkedBefore = (await owner())?.last.getTime() ?? 0;
    await b.tick();
    await b.idle();
    t.equal((await owner())?.owner, "dead-worker", "leased to another worker: left alone");
    t.equal((await owner())?.last.getTime(), checkedBefore, "and not checked");
    await new Promise((r) => setTimeout(r, 1_100));
    await b.tick();
    await b.idle();
    t.equal((await owner())?.owner, null, "after the lease period, taken over and checked");
    t.ok(((await owner())?.last.getTime() ?? 0) > checkedBefore);
  },
);

t.test("a deleted connection is not checked again", async (t: Test) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 500 });
  t.teardown(() => worker.stop());
  const id = await connectionTo(ta, w.keys.alicePersonal, sim.url);
  await worker.tick();
  await worker.idle();
  t.equal((await call(ta.app, w.keys.alicePersonal, "DELETE", `/v1/connections/${id}`)).statusCode, 200);
  await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now()"); // every remaining connection due
  await worker.tick();
  await worker.idle();
  await ta.ctx.stores.series.waitVisible();
  const samples = await ta.ctx.stores.series.count(availabilitySamples, {
    where: [{ column: "connection_id", op: "eq", value: id }],
  });
  t.equal(samples, 1, "only the check from before the deletion");
});

t.test("a check that outlasts its lease keeps it: another worker does not check again", async (t: Test) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  // each platform request takes 1.2 s: a check (two requests, and a sync) runs past a 1 s lease
  const sim = await startWorkflowA({ latencyMs: 1200 });
  t.teardown(() => sim.close());
  const a = new ProbeWorker(ta.ctx, { workerId: "worker-a", leaseMs: 1000, timeoutMs: 5000 });
  const b = new ProbeWorker(ta.ctx, { workerId: "worker-b", leaseMs: 1000, timeoutMs: 5000 });
  t.teardown(() => Promise.all([a.stop(), b.stop()]));
  const id = await connectionTo(ta, w.keys.alicePersonal, sim.url);
  await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now() WHERE id = $1", [id]);
  t.ok((await a.tick()) >= 1, "worker A claims the due connections");
  const owner = async () =>
    (
      await ta.ctx.stores.db.query<{ owner: string | null; live: boolean }>(
        "SELECT lease_owner AS owner, lease_until > now() AS live FROM connections WHERE id = $1",
        [id],
      )
    ).rows[0];
  for (const ms of [1500, 2500]) {
    await new Promise((r) => setTimeout(r, ms - (ms === 2500 ? 1500 : 0)));
    t.same(await owner(), { owner: "worker-a", live: true }, `${ms} ms in: still worker A's lease`);
    t.equal(await b.tick(), 0, `${ms} ms in: worker B claims nothing`);
  }
  t.same(await owner(), { owner: "worker-a", live: true }, "claimed by worker A");
  await a.idle();
  await b.idle();
  await ta.ctx.stores.series.waitVisible();
  const samples = await ta.ctx.stores.series.count(availabilitySamples, {
    where: [{ column: "connection_id", op: "eq", value: id }],
  });
  t.equal(samples, 1, "one check, one sample");
  t.same(await owner(), { owner: null, live: null }, "the recorded result ended the lease");
});

t.test("a backlog is claimed as checks make room, not a tick later", async (t: Test) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  // checks slower than the worker's backlog poll (10 ms): each poll finds little room
  const sim = await startWorkflowA({ latencyMs: 20 });
  t.teardown(() => sim.close());
  const first = await connectionTo(ta, w.keys.alicePersonal, sim.url);
  await ta.ctx.stores.db.query(
    `INSERT INTO connections (id, user_id, organization_id, service_type, service_name, status, base_url,
                              api_key_enc, api_key_length, check_interval_seconds, next_check_at)
     SELECT gen_random_uuid()::text, user_id, organization_id, service_type, service_name || ' ' || g, status,
            base_url, api_key_enc, api_key_length, check_interval_seconds, next_check_at
       FROM connections, generate_series(1, 199) g WHERE id = $1`,
    [first],
  );
  const ids = (
    await ta.ctx.stores.db.query<{ id: string }>("SELECT id FROM connections WHERE base_url = $1", [sim.url])
  ).rows.map((r) => r.id);
  t.equal(ids.length, 200);
  const start = new Date();
  await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now() WHERE id = ANY($1::text[])", [
    ids,
  ]);
  // A claim statement that takes a while, as on a busy database: checks finish meanwhile, so
  // a claim's size says little about the backlog behind it.
  class SlowClaims extends ProbeWorker {
    protected override async claim(max: number) {
      const rows = await super.claim(max);
      await new Promise((r) => setTimeout(r, 20));
      return rows;
    }
  }
  // room for 16 x 8 claimed at once; the next regular tick would be a minute away
  const worker = new SlowClaims(ta.ctx, { timeoutMs: 2000, concurrency: 16, tickMs: 60_000 });
  t.teardown(() => worker.stop());
  worker.start();
  const checked = async () =>
    Number(
      (
        await ta.ctx.stores.db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM connections WHERE id = ANY($1::text[]) AND last_check_at >= $2",
          [ids, start.toISOString()],
        )
      ).rows[0]?.n,
    );
  const deadline = Date.now() + 20_000;
  while ((await checked()) < ids.length && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  t.equal(await checked(), ids.length, "all 200 checked without waiting for the next tick");
  // Claims reach 1.7 ticks ahead: the connections already claimed for their next slots are not
  // started by a stop, and their leases are given back for the next worker.
  await worker.stop();
  const held = await ta.ctx.stores.db.query("SELECT id FROM connections WHERE lease_owner = $1", [
    worker.workerId,
  ]);
  t.equal(held.rows.length, 0, "a stopped worker holds no leases");
});
