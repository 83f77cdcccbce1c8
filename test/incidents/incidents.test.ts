import t from "tap";
import { systemActor } from "../../src/core/actor.js";
import { acknowledgeIncident, openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { listIncidents } from "../../src/incidents/list.js";
import { testApp } from "../helpers/app.js";
import { seedTenants } from "../helpers/tenants.js";

t.test(
  "open -> acknowledged -> resolved, one timeline in causal order, outbox in the same transaction",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const db = ta.ctx.stores.db;
    const target = {
      connectionId: w.conns.PA,
      connectionName: "alice n8n",
      userId: w.users.alice.id,
      organizationId: null,
    };
    const at = new Date("2026-11-20T10:00:00Z");
    const open = (kind: "availability" | "anomaly") =>
      db.transaction((tx) =>
        openIncident(tx, target, {
          kind,
          title: "alice n8n is unavailable",
          detail: { failures: 3, reason: "timeout", summary: "executions doubled" },
          at,
          publicUrl: "https://vigil.example",
        }),
      );
    const id = await open("availability");
    t.type(id, "string", "opened");
    t.equal(await open("availability"), null, "at most one unresolved per connection and kind");
    t.type(await open("anomaly"), "string", "another kind is another incident");

    const ack = () =>
      db.transaction((tx) =>
        acknowledgeIncident(tx, {
          incidentId: id ?? "",
          by: "user_alice",
          note: "looking",
          at: new Date(at.getTime() + 60_000),
        }),
      );
    t.same(await ack(), { id, status: "acknowledged" });
    await t.rejects(ack(), { name: "ServiceError", code: "conflict" }, "only an open one");
    await t.rejects(
      db.transaction((tx) => acknowledgeIncident(tx, { incidentId: "nope", by: "x", at })),
      { name: "ServiceError", code: "not_found" },
    );

    const resolved = await db.transaction((tx) =>
      resolveIncident(tx, target, {
        kind: "availability",
        detail: { successes: 2 },
        at: new Date(at.getTime() + 120_000),
        publicUrl: "https://vigil.example",
      }),
    );
    t.equal(resolved, id, "an acknowledged incident resolves");

    const page = await listIncidents(ta.ctx, systemActor("test"), { connectionId: w.conns.PA, limit: 10 });
    const incident = page.rows.find((r) => r.id === id);
    t.match(incident, {
      kind: "availability",
      status: "resolved",
      opened_at: "2026-11-20T10:00:00.000Z",
      acknowledged_at: "2026-11-20T10:01:00.000Z",
      resolved_at: "2026-11-20T10:02:00.000Z",
    });
    t.same(
      incident?.events.map((e) => e.kind),
      ["opened", "notified", "acknowledged", "resolved", "notified"],
      "events in causal order",
    );
    t.same(incident?.events[2]?.detail, { by: "user_alice", note: "looking" });
    t.equal(page.next, null);

    const mails = await db.query<{ kind: string; subject: string }>(
      "SELECT kind, subject FROM notifications WHERE connection_id = $1 ORDER BY created_at, kind",
      [w.conns.PA],
    );
    t.same(
      mails.rows.map((m) => [m.kind, m.subject]),
      [
        ["anomaly", "[Vigil] anomaly on alice n8n"],
        ["failure", "[Vigil] alice n8n is down"],
        ["recovery", "[Vigil] alice n8n has recovered"],
      ],
      "failure and recovery e-mails to the owner; the anomaly kind has its own text",
    );

    // paging: one per page, newest first, `next` continues after the last row
    const first = await listIncidents(ta.ctx, systemActor("test"), { connectionId: w.conns.PA, limit: 1 });
    t.equal(first.rows.length, 1);
    t.ok(first.next);
    const second = await listIncidents(ta.ctx, systemActor("test"), {
      connectionId: w.conns.PA,
      limit: 1,
      after: first.next ?? undefined,
    });
    t.equal(second.rows.length, 1);
    t.not(second.rows[0]?.id, first.rows[0]?.id);
    t.equal(second.next, null);
  },
);
