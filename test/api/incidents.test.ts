import t from "tap";
import { type IncidentKind, openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants, type Tenants } from "../helpers/tenants.js";

/**
 * The incident lifecycle over the REST API (issue #14, point 3): open -> acknowledged ->
 * resolved, GET /v1/incidents/{id} with its timeline, the status and kind filters, and every bad
 * input a clear 4xx naming the field. The clock is the context's.
 */

const T0 = new Date("2026-11-20T10:00:00.000Z");
const minutes = (m: number) => new Date(T0.getTime() + m * 60_000);

function world(ta: TestApp, w: Tenants) {
  const targets = {
    PA: {
      connectionId: w.conns.PA,
      connectionName: "alice n8n",
      userId: w.users.alice.id,
      organizationId: null,
    },
    OA: {
      connectionId: w.conns.OA,
      connectionName: "org A make",
      userId: w.users.alice.id,
      organizationId: w.orgs.orgA.id,
    },
    PC: {
      connectionId: w.conns.PC,
      connectionName: "carol n8n",
      userId: w.users.carol.id,
      organizationId: null,
    },
  };
  const db = ta.ctx.stores.db;
  return {
    targets,
    open: async (c: keyof typeof targets, kind: IncidentKind, at: Date) => {
      ta.ctx.now = () => at;
      const id = await db.transaction((tx) =>
        openIncident(tx, targets[c], {
          kind,
          title: `${targets[c].connectionName}: ${kind}`,
          detail: { failures: 3, reason: "timeout", error: "timed out", summary: "x" },
          at,
          publicUrl: "https://vigil.example",
        }),
      );
      if (!id) throw new Error("not opened");
      return id;
    },
    resolve: (c: keyof typeof targets, kind: IncidentKind, at: Date) => {
      ta.ctx.now = () => at;
      return db.transaction((tx) =>
        resolveIncident(tx, targets[c], {
          kind,
          detail: { successes: 2 },
          reason: "two consecutive successful checks",
          at,
          publicUrl: "https://vigil.example",
        }),
      );
    },
  };
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`open -> acknowledged -> resolved over the API (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const w = await seedTenants(ta);
    const { open, resolve } = world(ta, w);
    const alice = w.keys.alicePersonal;
    const { app } = ta;

    const id = await open("PA", "availability", minutes(0));
    const one = await call(app, alice, "GET", `/v1/incidents/${id}`);
    t.equal(one.statusCode, 200);
    t.match(one.json(), {
      id,
      connection_id: w.conns.PA,
      kind: "availability",
      status: "open",
      opened_at: minutes(0).toISOString(),
      acknowledged_at: null,
      resolved_at: null,
      events: [
        { kind: "opened", at: minutes(0).toISOString(), detail: { failures: 3 } },
        { kind: "notified", detail: { kind: "failure", channels: ["email"], recipients: 1 } },
      ],
    });

    // acknowledge with a note, at the context's clock
    ta.ctx.now = () => minutes(5);
    const ack = await call(app, alice, "POST", `/v1/incidents/${id}/acknowledge`, {
      note: "looking into it",
    });
    t.equal(ack.statusCode, 200, "acknowledged", { body: ack.body });
    const acked = ack.json();
    t.match(acked, {
      id,
      status: "acknowledged",
      acknowledged_at: minutes(5).toISOString(),
      resolved_at: null,
    });
    const event = acked.events.at(-1);
    t.equal(event.kind, "acknowledged");
    t.equal(event.at, minutes(5).toISOString());
    t.same(
      event.detail,
      {
        by: {
          type: "api_key",
          key_id: event.detail.by.key_id,
          user_id: w.users.alice.id,
          organization_id: null,
        },
        note: "looking into it",
      },
      "who acknowledged: the API key and its user, with the note",
    );
    t.match(event.detail.by.key_id, /^[0-9a-f-]{36}$/);
    t.notOk(JSON.stringify(acked).includes(alice), "the key itself is never shown");

    // again: 200, nothing changes (idempotent), the first acknowledgement stands
    ta.ctx.now = () => minutes(6);
    const again = await call(app, w.keys.aliceOrgA, "POST", `/v1/incidents/${id}/acknowledge`, {
      note: "me too",
    });
    t.equal(again.statusCode, 403, "an organization key does not see alice's personal connection");
    const retry = await call(app, alice, "POST", `/v1/incidents/${id}/acknowledge`, { note: "me too" });
    t.equal(retry.statusCode, 200);
    t.same(retry.json(), acked, "acknowledging again changes nothing");

    // without a body at all, on another incident, by a member of the organization
    const orgIncident = await open("OA", "missed_heartbeat", minutes(7));
    ta.ctx.now = () => minutes(8);
    const byDave = await app.inject({
      method: "POST",
      url: `/v1/incidents/${orgIncident}/acknowledge`,
      headers: { authorization: `Bearer ${w.keys.davePersonal}` },
    });
    t.equal(byDave.statusCode, 200, "no body: an acknowledgement without a note", { body: byDave.body });
    t.match(byDave.json().events.at(-1), {
      kind: "acknowledged",
      detail: { by: { type: "api_key", user_id: w.users.dave.id }, note: null },
    });

    // resolved: the acknowledged incident resolves; acknowledging it now is a 409
    t.equal(await resolve("PA", "availability", minutes(10)), id);
    ta.ctx.now = () => minutes(11);
    const late = await call(app, alice, "POST", `/v1/incidents/${id}/acknowledge`, {});
    t.equal(late.statusCode, 409);
    t.match(late.json(), {
      success: false,
      error: {
        code: "CONFLICT",
        message: `Incident ${id} is already resolved; only an open incident can be acknowledged`,
      },
    });
    const final = (await call(app, alice, "GET", `/v1/incidents/${id}`)).json();
    t.same(
      final.events.map((e: { kind: string }) => e.kind),
      ["opened", "notified", "acknowledged", "resolved", "notified"],
      "the whole timeline, in causal order, nothing added by the refused requests",
    );
    t.match(final.events[3], {
      kind: "resolved",
      detail: { successes: 2, reason: "two consecutive successful checks", automatic: true },
    });
    t.match(final, { status: "resolved", resolved_at: minutes(10).toISOString() });

    // another tenant's incident: 403 (as the read API answers another tenant's connection); absent: 404
    const carols = await open("PC", "availability", minutes(12));
    for (const [method, url] of [
      ["GET", `/v1/incidents/${carols}`],
      ["POST", `/v1/incidents/${carols}/acknowledge`],
    ] as const) {
      const r = await call(app, alice, method, url, method === "POST" ? {} : undefined);
      t.equal(r.statusCode, 403, `${method} another tenant's incident`);
      t.match(r.json().error, { code: "FORBIDDEN", message: `No access to incident ${carols}` });
    }
    const carolsNow = (await call(app, w.keys.carolPersonal, "GET", `/v1/incidents/${carols}`)).json();
    t.equal(carolsNow.status, "open", "a refused acknowledgement changed nothing");
    const absent = "00000000-0000-4000-8000-000000000000";
    const missing = await call(app, alice, "POST", `/v1/incidents/${absent}/acknowledge`, {});
    t.equal(missing.statusCode, 404);
    t.match(missing.json().error, { code: "NOT_FOUND", message: `Incident ${absent} not found` });

    // a key without connections:write may read incidents but not acknowledge them
    const readOnly = await call(
      app,
      w.keys.aliceReadOnly,
      "POST",
      `/v1/incidents/${orgIncident}/acknowledge`,
      {},
    );
    t.equal(readOnly.statusCode, 403);
  });
}

t.test("status and kind filters, paging, and bad input", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const { open, resolve } = world(ta, w);
  const { app } = ta;
  const alice = w.keys.alicePersonal;

  const a1 = await open("PA", "availability", minutes(0));
  await resolve("PA", "availability", minutes(1));
  const a2 = await open("PA", "availability", minutes(2));
  const an = await open("PA", "anomaly", minutes(3));
  const bu = await open("OA", "budget", minutes(4));
  ta.ctx.now = () => minutes(5);
  t.equal((await call(app, alice, "POST", `/v1/incidents/${an}/acknowledge`, {})).statusCode, 200);
  await open("PC", "availability", minutes(6));

  const ids = async (url: string) => {
    const r = await call(app, alice, "GET", url);
    t.equal(r.statusCode, 200, url, { body: r.body });
    return r.json().data.map((x: { id: string }) => x.id);
  };
  t.same(await ids("/v1/incidents"), [bu, an, a2, a1], "newest first, another tenant's never");
  t.same(await ids("/v1/incidents?status=open"), [bu, a2]);
  t.same(await ids("/v1/incidents?status=acknowledged"), [an]);
  t.same(await ids("/v1/incidents?status=resolved"), [a1]);
  t.same(await ids("/v1/incidents?kind=availability"), [a2, a1]);
  t.same(await ids("/v1/incidents?kind=budget"), [bu]);
  t.same(await ids("/v1/incidents?kind=missed_heartbeat"), []);
  t.same(await ids(`/v1/incidents?kind=availability&status=open&connection_id=${w.conns.PA}`), [a2]);

  // pages of one under a filter; the cursor is bound to the filter
  const first = (await call(app, alice, "GET", "/v1/incidents?kind=availability&limit=1")).json();
  t.same(
    first.data.map((x: { id: string }) => x.id),
    [a2],
  );
  t.equal(first.pagination.has_more, true);
  const cursor = encodeURIComponent(first.pagination.next_cursor);
  const second = (
    await call(app, alice, "GET", `/v1/incidents?kind=availability&limit=1&cursor=${cursor}`)
  ).json();
  t.same(
    second.data.map((x: { id: string }) => x.id),
    [a1],
  );
  t.equal(second.pagination.next_cursor, null);
  const other = await call(app, alice, "GET", `/v1/incidents?kind=anomaly&limit=1&cursor=${cursor}`);
  t.equal(other.statusCode, 400);
  t.equal(other.json().error.code, "INVALID_CURSOR", "a cursor of another filter is refused");

  // bad input: 4xx naming the field, never a 500
  const long = "x".repeat(1001);
  const cases: [string, string, unknown, number, RegExp][] = [
    [
      "GET",
      "/v1/incidents?status=closed",
      undefined,
      400,
      /^query\.status: must be one of open, acknowledged, resolved$/,
    ],
    [
      "GET",
      "/v1/incidents?kind=outage",
      undefined,
      400,
      /^query\.kind: must be one of availability, missed_heartbeat, anomaly, budget, slo_burn$/,
    ],
    ["GET", "/v1/incidents?status=", undefined, 400, /^query\.status: must be one of/],
    ["GET", "/v1/incidents/not-an-id", undefined, 400, /^params\.id: must be an incident id \(a UUID\)$/],
    [
      "POST",
      `/v1/incidents/${a2}/acknowledge`,
      { note: long },
      400,
      /^body\.note: must be at most 1000 characters$/,
    ],
    ["POST", `/v1/incidents/${a2}/acknowledge`, { note: 42 }, 400, /^body\.note: must be a string$/],
    ["POST", `/v1/incidents/${a2}/acknowledge`, { note: ["a"] }, 400, /^body\.note: must be a string$/],
    ["POST", `/v1/incidents/${a2}/acknowledge`, { by: "someone" }, 400, /^body\.by: is not a known field$/],
    ["POST", `/v1/incidents/${a2}/acknowledge`, [1, 2], 400, /^body: /],
    ["POST", "/v1/incidents/nope/acknowledge", {}, 400, /^params\.id: must be an incident id/],
  ];
  for (const [method, url, body, status, message] of cases) {
    const r = await call(app, alice, method as "GET", url, body);
    t.equal(
      r.statusCode,
      status,
      `${method} ${url.slice(0, 70)} ${JSON.stringify(body)?.slice(0, 30) ?? ""}`,
      {
        body: r.body,
      },
    );
    t.match(r.json(), { success: false, error: { code: "VALIDATION_ERROR", message } });
  }
  const still = (await call(app, alice, "GET", `/v1/incidents/${a2}`)).json();
  t.equal(still.status, "open", "refused acknowledgements changed nothing");
  const ok = await call(app, alice, "POST", `/v1/incidents/${a2}/acknowledge`, { note: "x".repeat(1000) });
  t.equal(ok.statusCode, 200, "a note of exactly 1000 characters is kept");
  const acknowledged = ok.json().events.find((e: { kind: string }) => e.kind === "acknowledged");
  t.equal(acknowledged?.detail.note.length, 1000);
});
