import t from "tap";
import { gatewayHealth, watchHeartbeats } from "../../src/probes/heartbeats.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * A gateway that reports itself down (issue #14, point 3): an unhealthy heartbeat
 * (`gateway.status` not `healthy`, or `system.gatewayPidAlive: false`) is a failed check of the
 * gateway connection, so a run of `failure_threshold` of them opens an availability incident as a
 * failing probe does, and healthy heartbeats resolve it as two successful checks do. A resent old
 * heartbeat counts for nothing: not as a check, not as the daemon being back. The clock is the
 * context's.
 */

const T0 = new Date("2026-11-20T10:00:00.000Z");
const at = (minutes: number) => new Date(T0.getTime() + minutes * 60_000);

/** The heartbeat of minute `k`: the period (k-1, k], health as given. */
const beat = (k: number, status = "healthy", pidAlive = true) => ({
  type: "heartbeat",
  gateway: { status, latencyMs: 40 + k, version: "2.4.1" },
  system: { gatewayPidAlive: pidAlive },
  tokens: {
    period: {
      inputTokens: 100,
      outputTokens: 10,
      estimatedCostUsd: 0.01,
      startedAt: at(k - 1).toISOString(),
      endedAt: at(k).toISOString(),
    },
  },
});

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`a gateway that reports itself down opens an availability incident (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    // a 10-minute failure e-mail interval, to see the setting reach the heartbeat path
    const ta = await testApp(t, { relational: backend, env: { ALERT_FAILURE_MAIL_INTERVAL_SECONDS: "600" } });
    const w = await seedTenants(ta);
    const OB = w.conns.OB;
    const db = ta.ctx.stores.db;
    let clock = T0;
    ta.ctx.now = () => clock;
    /** Sends beat `body` at minute `m` (plus a second). */
    const send = async (m: number, body: unknown) => {
      clock = new Date(at(m).getTime() + 1000);
      const r = await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", body);
      t.equal(r.statusCode, 201, `heartbeat at minute ${m}`, { body: r.body });
      return r.json().heartbeat_id as string;
    };
    const state = async () =>
      (
        await db.query<{ status: string; failures: number; successes: number; last: Date | null }>(
          `SELECT status, consecutive_failures AS failures, consecutive_successes AS successes,
                  last_heartbeat_at AS last FROM connections WHERE id = $1`,
          [OB],
        )
      ).rows[0];
    const incidents = async () =>
      (
        await db.query<{ id: string; kind: string; status: string }>(
          "SELECT id, kind, status FROM incidents WHERE connection_id = $1 ORDER BY opened_at",
          [OB],
        )
      ).rows;

    t.equal((await state())?.status, "inactive", "a new gateway");
    await send(1, beat(1));
    t.match(await state(), { status: "active", failures: 0, successes: 1 }, "a healthy heartbeat: active");
    await send(2, beat(2));
    await send(3, beat(3, "degraded"));
    t.match(
      await state(),
      { status: "active", failures: 1, successes: 0 },
      "one unhealthy heartbeat: nothing yet",
    );
    await send(4, beat(4, "healthy", false));
    t.match(await state(), { status: "active", failures: 2 }, "gatewayPidAlive false is a failed check too");
    t.same(await incidents(), [], "no incident before the threshold (3)");
    await send(5, beat(5, "unhealthy"));
    t.match(await state(), { status: "error", failures: 3 });
    const [opened] = await incidents();
    t.match(opened, { kind: "availability", status: "open" }, "three in a row open an availability incident");
    const incident = (await call(ta.app, w.keys.bobOrgB, "GET", `/v1/incidents/${opened?.id}`)).json();
    t.match(incident, {
      title: "org B gateway reports itself down",
      opened_at: new Date(at(5).getTime() + 1000).toISOString(),
      events: [
        {
          kind: "opened",
          detail: {
            failures: 3,
            reason: "gateway_unhealthy",
            error: "gateway status unhealthy",
            source: "heartbeat",
          },
        },
        { kind: "notified", detail: { kind: "failure", recipients: 1 } },
      ],
    });
    const mail = await db.query<{ subject: string; body: string; recipient: string }>(
      "SELECT subject, body, recipient FROM notifications WHERE incident_id = $1",
      [opened?.id],
    );
    t.match(mail.rows, [
      {
        subject: "[Vigil] org B gateway is down",
        recipient: "bob@b.example",
        body: /failed 3 consecutive checks/,
      },
    ]);

    // a resent old heartbeat (a period older than the newest seen): stored once, counts for nothing
    const lastBefore = (await state())?.last;
    await send(6, beat(2));
    gatewayHealth(ta.ctx).forget(OB); // another node: only the stored newest heartbeat tells
    await send(6, beat(1));
    t.match(
      await state(),
      { status: "error", failures: 3, successes: 0 },
      "old healthy heartbeats are not successes",
    );
    t.same((await state())?.last, lastBefore, "nor the daemon being heard from");
    await send(6, beat(5, "unhealthy"));
    t.match(await state(), { failures: 3 }, "nor is a resend of the newest one a new failure");

    await send(7, beat(7));
    t.match(await state(), { status: "active", successes: 1 }, "a healthy heartbeat: active again");
    t.equal((await incidents())[0]?.status, "open", "one success does not resolve");
    await send(7, beat(6, "healthy")); // older than minute 7's: would be the second success if it counted
    t.equal((await incidents())[0]?.status, "open", "an old heartbeat never resolves it");
    await send(8, beat(8));
    t.equal((await incidents())[0]?.status, "resolved", "two healthy heartbeats resolve it");
    const resolved = (await call(ta.app, w.keys.bobOrgB, "GET", `/v1/incidents/${opened?.id}`)).json();
    t.same(
      resolved.events.map((e: { kind: string }) => e.kind),
      ["opened", "notified", "resolved", "notified"],
    );
    t.match(resolved.events[2].detail, {
      reason: "2 consecutive healthy heartbeats",
      automatic: true,
      source: "heartbeat",
    });
    t.match(resolved.events[3].detail, { kind: "recovery" });

    // steady: healthy heartbeats change nothing; then it flaps within ALERT_FAILURE_MAIL_INTERVAL_SECONDS
    await send(9, beat(9));
    for (const k of [10, 11, 12]) await send(k, beat(k, "degraded"));
    const second = (await incidents())[1];
    t.match(second, { kind: "availability", status: "open" }, "the next run opens the next incident");
    const notified = (await call(ta.app, w.keys.bobOrgB, "GET", `/v1/incidents/${second?.id}`)).json()
      .events[1];
    t.match(
      notified.detail,
      {
        kind: "failure",
        deferred_until: new Date(at(5).getTime() + 1000 + 600_000).toISOString(),
        reason: "at most one failure e-mail per connection every 600 s",
      },
      "its failure e-mail waits for the configured interval after the first",
    );
    for (const k of [13, 14]) await send(k, beat(k));
    t.equal((await incidents())[1]?.status, "resolved");
  });

  t.test(`a resent old heartbeat never counts as the daemon being back (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const w = await seedTenants(ta);
    const OB = w.conns.OB;
    let clock = T0;
    ta.ctx.now = () => clock;
    const send = async (m: number, body: unknown) => {
      clock = new Date(at(m).getTime() + 1000);
      return call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", body);
    };
    const missed = async () =>
      (
        await ta.ctx.stores.db.query<{ status: string }>(
          "SELECT status FROM incidents WHERE connection_id = $1 AND kind = 'missed_heartbeat'",
          [OB],
        )
      ).rows.map((r) => r.status);
    for (const k of [1, 2, 3]) t.equal((await send(k, beat(k))).statusCode, 201);

    // the daemon stops: ten minutes of silence
    clock = at(13);
    t.same(await watchHeartbeats(ta.ctx), { missed: 1, recovered: 0 });
    t.same(await missed(), ["open"]);
    // something resends the daemon's old heartbeats (a proxy, a queue): accepted, stored once;
    // the second as if another node, which has not seen this gateway, received it
    t.equal((await send(14, beat(3))).statusCode, 201);
    gatewayHealth(ta.ctx).forget(OB);
    t.equal((await send(14, beat(2))).statusCode, 201);
    clock = at(15);
    t.same(await watchHeartbeats(ta.ctx), { missed: 0, recovered: 0 }, "still missed");
    t.same(await missed(), ["open"]);
    const status = await call(ta.app, w.keys.bobOrgB, "GET", `/v1/connections/${OB}`);
    t.equal(status.json().status, "error", "and the connection stays in error");

    // the daemon really is back: a heartbeat of a new period
    t.equal((await send(16, beat(16))).statusCode, 201);
    clock = at(16.5);
    t.same(await watchHeartbeats(ta.ctx), { missed: 0, recovered: 1 });
    t.same(await missed(), ["resolved"]);
    const events = await ta.ctx.stores.db.query<{ detail: { reason?: string } }>(
      `SELECT e.detail FROM incident_events e JOIN incidents i ON i.id = e.incident_id
        WHERE i.connection_id = $1 AND e.kind = 'resolved'`,
      [OB],
    );
    t.match(events.rows[0]?.detail, { reason: "a new heartbeat arrived: the daemon is running again" });
  });
}
