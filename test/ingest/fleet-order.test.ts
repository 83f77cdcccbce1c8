import t from "tap";
import { PERMISSIONS } from "../../src/core/actor.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { availabilitySamples, gatewayHeartbeats, gatewayModelUsage } from "../../src/stores/series/tables.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call } from "../helpers/tenants.js";

/*
 * A fleet's heartbeats arrive interleaved and out of their periods' order (issue #17). What a
 * user checks: every heartbeat is stored once, at its period's end, the totals and the uptime are
 * those of what was sent, and a resend (to another node, after a restart, of an older heartbeat,
 * concurrently) never adds a row.
 */

const BASE = Date.parse("2026-11-20T10:00:00.000Z");

const body = (endMs: number, tokens: number, status = "healthy") => ({
  type: "heartbeat",
  gateway: { status, latencyMs: 10, version: "2.4.1" },
  system: { gatewayPidAlive: true },
  tokens: {
    period: {
      inputTokens: tokens,
      outputTokens: 1,
      startedAt: new Date(endMs - 1000).toISOString(),
      endedAt: new Date(endMs).toISOString(),
    },
    byModel: [
      { model: "gpt-4o", inputTokens: tokens, outputTokens: 1, estimatedCostUsd: 0.001 },
      { model: "claude-sonnet-4-5", inputTokens: 0, outputTokens: 0 },
    ],
  },
});

async function gateways(ta: TestApp, n: number) {
  const user = await createUser(ta.ctx.stores.db, { email: `fleet-${n}@x.example`, plan: "enterprise" });
  const { key } = await createKey(ta.ctx.stores.db, { user: user.id, permissions: [...PERMISSIONS] });
  const out: { id: string; key: string }[] = [];
  for (let i = 0; i < n; i++) {
    const r = await call(ta.app, key, "POST", "/v1/connections", {
      service_type: "gateway",
      service_name: `gw-${i}`,
    });
    if (r.statusCode !== 201) throw new Error(r.body);
    out.push({ id: r.json().connection.id, key: r.json().ingest_api_key });
  }
  return { owner: key, gws: out };
}

const send = (ta: TestApp, key: string, b: unknown) => call(ta.app, key, "POST", "/v1/gateway/ingest", b);

async function storedRows(ta: TestApp, connectionId: string) {
  await ta.ctx.stores.series.waitVisible();
  const where = [{ column: "connection_id", op: "eq" as const, value: connectionId }];
  const hb = (await ta.ctx.stores.series.page(gatewayHeartbeats, { where, limit: 1000 })).rows;
  const models = await ta.ctx.stores.series.count(gatewayModelUsage, { where });
  const samples = await ta.ctx.stores.series.count(availabilitySamples, { where });
  return { hb, models, samples };
}

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`interleaved heartbeats of a fleet, on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    ta.ctx.now = () => new Date(BASE + 10_000);
    const { owner, gws } = await gateways(ta, 12);
    // each gateway's 4 periods end within 2 s; all 48 are sent at once, in a shuffled order
    const sent: { gw: (typeof gws)[number]; end: number; tokens: number }[] = [];
    gws.forEach((gw, g) => {
      for (let k = 0; k < 4; k++) sent.push({ gw, end: BASE + k * 500 + g * 7, tokens: 100 + g * 10 + k });
    });
    const shuffled = [...sent].sort((a, b) => ((a.end * 7919) % 97) - ((b.end * 7919) % 97));
    // every gateway's period ending at BASE + 1 s reports the gateway degraded
    const statusOf = (end: number) =>
      (end - BASE) % 1000 < 100 && end - BASE >= 1000 ? "degraded" : "healthy";
    const answers = await Promise.all(
      shuffled.map((s) => send(ta, s.gw.key, body(s.end, s.tokens, statusOf(s.end)))),
    );
    t.same(
      answers.map((a) => a.statusCode),
      answers.map(() => 201),
      "every heartbeat acknowledged",
    );
    let stored = 0;
    let late = 0;
    for (const gw of gws) {
      const rows = await storedRows(ta, gw.id);
      stored += rows.hb.length;
      t.equal(rows.models, rows.hb.length * 2, "two model rows per heartbeat");
      t.equal(rows.samples, rows.hb.length, "one sample per heartbeat");
      for (const r of rows.hb) {
        const end = (r.period_end as Date).getTime();
        const moved = r.ts.getTime() - end;
        if (moved !== 0) late++;
      }
    }
    t.equal(stored, sent.length, "each heartbeat stored once");
    t.equal(late, 0, "each stored at its period's end");

    let heartbeats = 0;
    let tokens = 0;
    for (const gw of gws) {
      const totals = await call(
        ta.app,
        owner,
        "PUT",
        `/v1/usage?connection_id=${gw.id}&start_date=2026-11-20T00:00:00Z&end_date=2026-11-21T00:00:00Z`,
      );
      t.equal(totals.statusCode, 200, totals.body);
      heartbeats += totals.json().gateway.heartbeats;
      tokens += totals.json().gateway.input_tokens;
    }
    t.equal(heartbeats, sent.length, "PUT /v1/usage counts each heartbeat once");
    const summary = await call(ta.app, owner, "GET", "/v1/availability/summary?window=day&limit=100");
    t.equal(summary.statusCode, 200, summary.body);
    for (const gw of gws) {
      const s = summary.json().data.find((d: { connection_id: string }) => d.connection_id === gw.id);
      t.match(
        s,
        { checks: 4, available_checks: 3, uptime_percent: 75 },
        "uptime counts every heartbeat once",
      );
    }
    t.equal(
      tokens,
      sent.reduce((s, x) => s + x.tokens, 0),
      "token totals are the sums of what was sent",
    );
  });

  t.test(`resends are stored once wherever they land, on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const a = await testApp(t, { series });
    const b = await testApp(t, { sameStoresAs: a }); // a second node on the same stores
    for (const n of [a, b]) n.ctx.now = () => new Date(BASE + 10_000);
    const { gws } = await gateways(a, 2);
    const [g1, g2] = gws as [(typeof gws)[0], (typeof gws)[0]];

    // g2's later period first, then g1's earlier one
    t.equal((await send(a, g2.key, body(BASE + 300, 5))).statusCode, 201);
    const first = await send(a, g1.key, body(BASE + 100, 7));
    t.equal(first.statusCode, 201);
    const before = await storedRows(a, g1.id);
    t.equal(before.hb.length, 1);
    const storedAt = before.hb[0]?.ts.getTime() as number;
    t.equal(storedAt, BASE + 100, "stored at its period's end");

    // the same heartbeat to the other node, which has never seen it
    const resent = await send(b, g1.key, body(BASE + 100, 7));
    t.equal(resent.statusCode, 201);
    t.equal(resent.json().heartbeat_id, first.json().heartbeat_id);
    // after a restart: a third node with empty memory
    const c = await testApp(t, { sameStoresAs: a });
    c.ctx.now = () => new Date(BASE + 20_000);
    t.equal((await send(c, g1.key, body(BASE + 100, 7))).statusCode, 201);
    // concurrently, to both nodes
    const burst = await Promise.all([a, b, c, a, b].map((n) => send(n, g1.key, body(BASE + 100, 7))));
    t.same(
      burst.map((r) => r.statusCode),
      [201, 201, 201, 201, 201],
    );
    let after = await storedRows(a, g1.id);
    t.equal(after.hb.length, 1, "one heartbeat row after 7 resends to 3 nodes");
    t.equal(after.hb[0]?.ts.getTime(), storedAt, "still at the time it was first stored");
    t.equal(after.models, 2);
    t.equal(after.samples, 1);

    // an older heartbeat resent after a newer one: found by its id
    t.equal((await send(a, g1.key, body(BASE + 1_100, 9))).statusCode, 201);
    t.equal((await send(b, g1.key, body(BASE + 100, 7))).statusCode, 201);
    after = await storedRows(a, g1.id);
    t.equal(after.hb.length, 2, "the older heartbeat is not stored twice");
    t.equal(after.models, 4);
    t.equal(after.samples, 2);
  });
}
