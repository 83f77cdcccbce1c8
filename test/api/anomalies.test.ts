import { randomUUID } from "node:crypto";
import t from "tap";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

t.test("/v1/anomalies: visible connections only, status filter, cursor pages", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const insert = async (
    connection: string,
    minutesAgo: number,
    status = "open",
    metric = "response_time",
  ) => {
    const id = randomUUID();
    await ta.ctx.stores.db.query(
      `INSERT INTO anomalies (id, connection_id, metric, status, detected_at, window_start, window_end, observed, baseline_mean, baseline_stddev, z_score)
       VALUES ($1, $2, $5, $3, now() - make_interval(mins => $4), now() - interval '2 hours', now() - interval '1 hour', 900, 120, 40, 19.5)`,
      [id, connection, status, minutesAgo, metric],
    );
    return id;
  };
  const ids = [
    await insert(w.conns.PA, 1),
    await insert(w.conns.OA, 2, "resolved"),
    await insert(w.conns.PA, 3, "open", "failure_rate"),
  ];
  await insert(w.conns.PC, 1);
  const all = (await call(ta.app, w.keys.alicePersonal, "GET", "/v1/anomalies")).json();
  t.same(
    all.data.map((a: { id: string }) => a.id),
    ids,
    "newest first, another tenant's excluded",
  );
  t.match(all.data[0], {
    connection_id: w.conns.PA,
    metric: "response_time",
    status: "open",
    observed: 900,
    baseline_mean: 120,
    z_score: 19.5,
  });
  const open = (await call(ta.app, w.keys.alicePersonal, "GET", "/v1/anomalies?status=open&limit=1")).json();
  t.equal(open.data.length, 1);
  const next = (
    await call(
      ta.app,
      w.keys.alicePersonal,
      "GET",
      `/v1/anomalies?status=open&limit=1&cursor=${open.pagination.next_cursor}`,
    )
  ).json();
  t.same(
    [...open.data, ...next.data].map((a: { id: string }) => a.id),
    [ids[0], ids[2]],
  );
  t.equal(next.pagination.has_more, false);
  const bad = await call(ta.app, w.keys.alicePersonal, "GET", "/v1/anomalies?status=closed");
  t.equal(bad.statusCode, 400);
  t.match(bad.json().error.message, /query\.status: must be open or resolved/);
});
