import t from "tap";
import { watchHeartbeats } from "../../src/probes/heartbeats.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";
import { connectionStatusCache } from "../../src/connections/status.js";

const beat = {
  type: "heartbeat",
  gateway: { status: "healthy", latencyMs: 9, version: "1" },
};

t.test(
  "a silent gateway opens a missed_heartbeat incident with gap-fill; the next heartbeat resolves it",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const id = w.conns.OB;
    const db = ta.ctx.stores.db;
    const monitor = { tick: () => watchHeartbeats(ta.ctx) };
    t.equal((await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", beat)).statusCode, 201);
    t.same(await monitor.tick(), { missed: 0, recovered: 0 }, "a gateway that just sent a heartbeat is fine");

    // ten minutes of silence
    await db.query("UPDATE connections SET last_heartbeat_at = now() - interval '10 minutes' WHERE id = $1", [
      id,
    ]);
    t.same(await monitor.tick(), { missed: 1, recovered: 0 });
    const incidents = () =>
      db.query<{ kind: string; status: string }>(
        "SELECT kind, status FROM incidents WHERE connection_id = $1",
        [id],
      );
    t.same((await incidents()).rows, [{ kind: "missed_heartbeat", status: "open" }]);
    const status = async () =>
      (await db.query<{ status: string }>("SELECT status FROM connections WHERE id = $1", [id])).rows[0]
        ?.status;
    t.equal(await status(), "error");
    t.same(await monitor.tick(), { missed: 0, recovered: 0 }, "one incident, however long the silence");

    await ta.ctx.stores.series.waitVisible();
    const where = [
      { column: "connection_id", op: "eq" as const, value: id },
      { column: "synthetic", op: "eq" as const, value: true },
    ];
    const gap = await ta.ctx.stores.series.count(availabilitySamples, { where });
    t.ok(gap >= 9 && gap <= 10, `one synthetic sample per missed 60 s slot (${gap})`);
    const sample = (await ta.ctx.stores.series.page(availabilitySamples, { where, limit: 1 })).rows[0];
    t.match(sample, { available: false, synthetic: true, source: "gap_fill", reason: "missed_heartbeat" });
    t.equal(
      await ta.ctx.stores.series.count(availabilitySamples, { where }),
      gap,
      "writing the gap again adds nothing",
    );

    // the daemon comes back
    connectionStatusCache(ta.ctx).forget(id); // as if its last write on this node were older than 15 s
    t.equal(
      (
        await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", {
          ...beat,
          gateway: { ...beat.gateway, latencyMs: 10 },
        })
      ).statusCode,
      201,
    );
    t.equal(await status(), "active", "the connection recovers with the heartbeat");
    t.same(await monitor.tick(), { missed: 0, recovered: 1 });
    t.same((await incidents()).rows, [{ kind: "missed_heartbeat", status: "resolved" }]);
    const mails = await db.query<{ kind: string }>(
      "SELECT kind FROM notifications WHERE connection_id = $1 ORDER BY created_at",
      [id],
    );
    t.same(
      mails.rows.map((m) => m.kind),
      ["failure", "recovery"],
      "the organization's owner is told both",
    );
  },
);

t.test("probe gap-fill: slots missed while Vigil was down carry the last known state", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 500 });
  t.teardown(() => worker.stop());
  const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "gap",
    base_url: sim.url,
    api_key: "sim-api-key",
  });
  const id = r.json().connection.id;
  await worker.tick();
  await worker.idle();
  // Vigil was down for five minutes: the slot due five minutes ago never ran (30 s interval)
  await ta.ctx.stores.db.query(
    "UPDATE connections SET next_check_at = now() - interval '5 minutes' WHERE id = $1",
    [id],
  );
  await worker.tick();
  await worker.idle();
  await ta.ctx.stores.series.waitVisible();
  const rows = (
    await ta.ctx.stores.series.page(availabilitySamples, {
      where: [{ column: "connection_id", op: "eq", value: id }],
      limit: 50,
    })
  ).rows;
  const synthetic = rows.filter((s) => s.synthetic);
  t.ok(synthetic.length >= 9 && synthetic.length <= 10, `one per missed slot (${synthetic.length})`);
  t.ok(
    synthetic.every((s) => s.available && s.reason === "not_checked" && s.source === "gap_fill"),
    "last known state: available",
  );
  t.equal(rows.filter((s) => !s.synthetic).length, 2, "plus the real checks");
});
