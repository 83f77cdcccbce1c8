import t, { type Test } from "tap";
import { PERMISSIONS } from "../../src/core/actor.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { watchHeartbeats } from "../../src/probes/heartbeats.js";
import { type SeriesStore, SeriesUnavailableError } from "../../src/stores/series/types.js";
import { testApp } from "../helpers/app.js";
import { freshSeries } from "../helpers/backends.js";
import { call } from "../helpers/tenants.js";
import { sleep } from "./lib.js";

/**
 * The missed-heartbeat monitor must not hold Vigil's own trouble against a gateway, in real time
 * (gateways here expect a heartbeat every second or two, with as much grace):
 *
 * 1. a gateway that keeps sending is never "missed", however short its deadline (a healthy
 *    gateway's last-heard time is written only every so often, to save writes);
 * 2. while Vigil's series store is unavailable the daemon's heartbeats are refused (503): that
 *    time is not silence, so the monitor's first run after the store is back opens nothing, and a
 *    gateway that stays silent after the outage is still reported once its deadline has passed.
 */
async function world(t: Test, deadline: { interval: number; grace: number }, series?: SeriesStore) {
  const ta = await testApp(t, series ? { seriesStore: series } : {});
  const db = ta.ctx.stores.db;
  const user = await createUser(db, { email: "hb@x.example", plan: "enterprise" });
  const { key } = await createKey(db, { user: user.id, permissions: [...PERMISSIONS] });
  const res = await call(ta.app, key, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "gw",
    heartbeat_interval_seconds: deadline.interval,
    heartbeat_grace_seconds: deadline.grace,
  });
  t.equal(res.statusCode, 201);
  const body = res.json() as { connection: { id: string }; ingest_api_key: string };
  let n = 0;
  const beat = async () => {
    const started = new Date(Date.now() - 500).toISOString();
    return (
      await call(ta.app, body.ingest_api_key, "POST", "/v1/gateway/ingest", {
        type: "heartbeat",
        gateway: { status: "healthy", latencyMs: 1 + (n++ % 50), version: "1" },
        tokens: {
          period: { inputTokens: 1, outputTokens: 1, startedAt: started, endedAt: new Date().toISOString() },
        },
      })
    ).statusCode;
  };
  const incidents = async () =>
    (
      await db.query<{ kind: string; status: string }>(
        "SELECT kind, status FROM incidents WHERE connection_id = $1",
        [body.connection.id],
      )
    ).rows;
  return { ta, beat, incidents, id: body.connection.id };
}

t.test("a gateway that keeps sending is never missed, however short its deadline", async (t) => {
  // 2 s + 2 s: a last-heard time written only every 15 s (as it was) would look silent by 4 s
  const w = await world(t, { interval: 2, grace: 2 });
  for (let i = 0; i < 14; i++) {
    t.equal(await w.beat(), 201);
    await sleep(400);
    t.same(await watchHeartbeats(w.ta.ctx), { missed: 0, recovered: 0 }, `monitor run ${i + 1}`);
  }
  t.same(await w.incidents(), []);
});

t.test("time the series store was unavailable is not a gateway's silence", async (t) => {
  const real = await freshSeries(t, "pglite");
  let down = false;
  const series = new Proxy(real, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== "function") return v;
      return (...args: unknown[]) =>
        down && ["append", "write", "page", "count", "aggregate", "ping"].includes(String(prop))
          ? Promise.reject(new SeriesUnavailableError("sql", "the series store is stopped"))
          : (v as (...a: unknown[]) => unknown).apply(target, args);
    },
  });
  const w = await world(t, { interval: 1, grace: 1 }, series);
  t.equal(await w.beat(), 201);

  // The store stops for 3 s, three times the gateway's deadline; its daemon keeps trying.
  down = true;
  const outageEnds = Date.now() + 3_000;
  let refused = 0;
  while (Date.now() < outageEnds) {
    if ((await w.beat()) === 503) refused++;
    await watchHeartbeats(w.ta.ctx).catch(() => {}); // the monitor cannot write its gap-fill either
    await sleep(200);
  }
  t.ok(refused > 5, `${refused} heartbeats refused with 503 while the store was down`);
  down = false;

  // Back: the first run after the outage, before the daemon got through again, opens nothing.
  t.same(await watchHeartbeats(w.ta.ctx), { missed: 0, recovered: 0 }, "no incident for Vigil's own outage");
  t.same(await w.incidents(), []);

  // A gateway that stays silent after the outage is still reported once its deadline passes.
  await sleep(2_500);
  t.same(
    await watchHeartbeats(w.ta.ctx),
    { missed: 1, recovered: 0 },
    "real silence after the outage counts",
  );
  t.same(await w.incidents(), [{ kind: "missed_heartbeat", status: "open" }]);
});
