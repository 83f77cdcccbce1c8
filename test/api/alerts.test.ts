import t from "tap";
import { runAdmin } from "../../src/admin/commands.js";
import { addMember, createKey } from "../../src/identity/accounts.js";
import { openIncident } from "../../src/incidents/incidents.js";
import { createLogger } from "../../src/lib/logger.js";
import { DeliveryJob } from "../../src/notifications/delivery.js";
import type { Mail, Mailer } from "../../src/notifications/mailer.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * The alert history (issue #14, point 4): GET /v1/alerts lists every notification Vigil decided
 * to send, one row per recipient, with the read API's cursor pages and filters, under the key's
 * visibility. Audits (API key created or revoked, credentials changed, connection deleted,
 * membership changed) are `audit` rows to the account's owner(s), e-mailed through the outbox.
 */

interface AlertRow {
  id: string;
  kind: string;
  channel: string;
  recipient: string;
  subject: string;
  body: string;
  status: string;
  attempts: number;
  created_at: string;
  connection_id: string | null;
  connection_name: string | null;
  incident_id: string | null;
  anomaly_id: string | null;
  audit_event: string | null;
  organization_id: string | null;
  webhook_id: string | null;
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`every audit kind, e-mailed and listed to the right people (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const w = await seedTenants(ta);
    const { app } = ta;
    const db = ta.ctx.stores.db;
    const alerts = async (key: string, query = "") => {
      const r = await call(app, key, "GET", `/v1/alerts${query}`);
      t.equal(r.statusCode, 200, `GET /v1/alerts${query}`, { body: r.body });
      return r.json().data as AlertRow[];
    };
    const audits = async (key: string, event: string) =>
      (await alerts(key, "?kind=audit&limit=1000")).filter((a) => a.audit_event === event);

    // API key created (seedTenants minted alice's keys through the account verbs)
    const created = await audits(w.keys.alicePersonal, "api_key_created");
    t.equal(created.filter((a) => a.organization_id === null).length, 3, "alice's three personal keys");
    t.match(
      created.find((a) => a.organization_id === w.orgs.orgA.id),
      {
        kind: "audit",
        channel: "email",
        recipient: "alice@a.example",
        subject: "[Vigil] An API key was created",
        body: /An organization API key \(id [0-9a-f-]{36}, starting vgl_\S+…\) of alice@a\.example was created/,
        status: "pending",
        connection_id: null,
        incident_id: null,
      },
    );
    for (const a of created)
      t.notOk(
        Object.values(w.keys).some((k) => k && a.body.includes(k)),
        "no key in the text",
      );

    // API key revoked, once
    const key = await createKey(db, { user: w.users.carol.id, permissions: ["analytics:read"], name: "ci" });
    await runAdmin(
      { db, credentials: ta.ctx.credentials, now: () => ta.ctx.now() },
      {
        command: "revoke-key",
        options: { id: key.id },
      },
    );
    await runAdmin(
      { db, credentials: ta.ctx.credentials },
      { command: "revoke-key", options: { id: key.id } },
    );
    const revoked = await audits(w.keys.carolPersonal, "api_key_revoked");
    t.equal(revoked.length, 1, "revoking a revoked key again tells nobody");
    t.match(revoked[0], {
      recipient: "carol@c.example",
      subject: "[Vigil] An API key was revoked",
      body: new RegExp(`personal API key "ci" \\(id ${key.id}, starting vgl_`),
    });

    // connection credentials changed: the field is named, never the value
    const put = await call(app, w.keys.alicePersonal, "PUT", `/v1/connections/${w.conns.PA}`, {
      api_key: "a-brand-new-secret-key",
    });
    t.equal(put.statusCode, 200);
    const renamed = await call(app, w.keys.alicePersonal, "PUT", `/v1/connections/${w.conns.PA}`, {
      service_name: "alice n8n (prod)",
    });
    t.equal(renamed.statusCode, 200);
    const creds = await audits(w.keys.alicePersonal, "connection_credentials_changed");
    t.equal(creds.length, 1, "a rename is not audited");
    t.match(creds[0], {
      subject: "[Vigil] Credentials changed on alice n8n",
      connection_id: w.conns.PA,
      recipient: "alice@a.example",
      body: /The api_key of the connection "alice n8n" .* changed, by API key [0-9a-f-]{36} \(user /,
    });
    t.notOk(creds[0]?.body.includes("a-brand-new-secret-key"), "the new credential is not in the e-mail");
    // an organization's connection: its owners and admins are told, every member can read it
    const orgPut = await call(app, w.keys.davePersonal, "PUT", `/v1/connections/${w.conns.OA}`, {
      api_token: "another-secret-token",
    });
    t.equal(orgPut.statusCode, 200);
    const orgCreds = await audits(w.keys.davePersonal, "connection_credentials_changed");
    t.match(orgCreds, [
      { connection_id: w.conns.OA, recipient: "alice@a.example", organization_id: w.orgs.orgA.id },
    ]);
    t.same(await audits(w.keys.bobPersonal, "connection_credentials_changed"), [], "bob sees none of it");

    // connection deleted: the row stays readable, its connection_id is gone, the name is kept
    const del = await call(app, w.keys.bobPersonal, "DELETE", `/v1/connections/${w.conns.PB}`);
    t.equal(del.statusCode, 200);
    const deleted = await audits(w.keys.bobPersonal, "connection_deleted");
    t.match(deleted, [
      {
        subject: "[Vigil] Connection deleted: bob n8n",
        body: new RegExp(`The workflow_a connection "bob n8n" \\(${w.conns.PB}\\) was deleted by API key`),
        recipient: "bob@b.example",
        connection_id: null,
        connection_name: null,
        organization_id: null,
      },
    ]);
    t.same(await audits(w.keys.alicePersonal, "connection_deleted"), [], "alice does not see bob's");
    t.same(
      await audits(w.keys.bobOrgB, "connection_deleted"),
      [],
      "nor does org B: it was bob's personal one",
    );

    // membership changed: dave becomes an admin of org A; the same role again changes nothing
    await addMember(db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "admin" });
    await addMember(db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "admin" });
    const members = await audits(w.keys.aliceOrgA, "membership_changed");
    t.same(
      members.map((a) => [a.recipient, a.subject, a.body.split(",")[0]]).sort(),
      [
        [
          "alice@a.example",
          "[Vigil] Membership changed in Org A",
          'dave@a.example is now admin of the organization "Org A" (was member)',
        ],
        [
          "alice@a.example",
          "[Vigil] Membership changed in Org A",
          'dave@a.example joined the organization "Org A" as member',
        ],
        [
          "dave@a.example",
          "[Vigil] Membership changed in Org A",
          'dave@a.example is now admin of the organization "Org A" (was member)',
        ],
      ],
      "to the owners and admins after the change (dave is an admin now); the same role again tells nobody",
    );
    t.ok(members.every((a) => a.organization_id === w.orgs.orgA.id && a.connection_id === null));
    t.same(await audits(w.keys.carolPersonal, "membership_changed"), [], "carol sees none of org A's");

    // the audits go out by e-mail like every alert
    const sent: Mail[] = [];
    const mailer: Mailer = { send: async (m) => void sent.push(m), close() {} };
    const job = new DeliveryJob(() => db, mailer, createLogger("silent"), { batch: 100 });
    while ((await job.tick()) > 0);
    for (const subject of [
      "[Vigil] An API key was created",
      "[Vigil] An API key was revoked",
      "[Vigil] Credentials changed on alice n8n",
      "[Vigil] Connection deleted: bob n8n",
      "[Vigil] Membership changed in Org A",
    ])
      t.ok(
        sent.some((m) => m.subject === subject),
        `e-mailed: ${subject}`,
      );
    const after = await audits(w.keys.bobPersonal, "connection_deleted");
    t.match(after, [{ status: "sent", attempts: 1 }]);
  });
}

t.test("/v1/alerts: cursor pages, kind and connection_id filters, tenant isolation", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const { app } = ta;
  const db = ta.ctx.stores.db;
  const T0 = new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000);
  // failures, recoveries, anomalies and budget warnings of alice's and carol's connections
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
  let minute = 0;
  for (const [c, kind] of [
    ["PA", "availability"],
    ["PA", "anomaly"],
    ["OA", "budget"],
    ["PC", "availability"],
    ["OA", "missed_heartbeat"],
  ] as const) {
    const at = new Date(T0.getTime() + minute++ * 60_000);
    await db.transaction((tx) =>
      openIncident(tx, targets[c], {
        kind,
        title: "x",
        detail: { failures: 3, silentSeconds: 200, summary: "s" },
        at,
        publicUrl: "https://v",
      }),
    );
  }
  const get = (key: string, url: string) => call(app, key, "GET", url);
  const all = async (key: string, query: string, limit: number) => {
    const seen: AlertRow[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 100; page++) {
      const sep = query ? "&" : "";
      const r = await get(
        key,
        `/v1/alerts?${query}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      t.equal(r.statusCode, 200, { body: r.body });
      const body = r.json();
      t.ok(body.data.length <= limit);
      seen.push(...body.data);
      cursor = body.pagination.next_cursor;
      t.equal(body.pagination.has_more, cursor !== null);
      if (!cursor) break;
    }
    return seen;
  };

  const alice = w.keys.alicePersonal;
  const whole = (await get(alice, "/v1/alerts?limit=1000")).json().data as AlertRow[];
  const paged = await all(alice, "", 2);
  t.same(
    paged.map((a) => a.id),
    whole.map((a) => a.id),
    "pages of 2 give every row once, in the same order",
  );
  for (let i = 1; i < whole.length; i++) {
    const [a, b] = [whole[i - 1], whole[i]];
    t.ok(
      a && b && (a.created_at > b.created_at || (a.created_at === b.created_at && a.id > b.id)),
      "newest first",
    );
  }
  t.same(
    whole.filter((a) => a.kind !== "audit").map((a) => [a.kind, a.connection_id]),
    [
      ["failure", w.conns.OA],
      ["budget_warning", w.conns.OA],
      ["anomaly", w.conns.PA],
      ["failure", w.conns.PA],
    ],
    "alice: her personal connection's and org A's, never carol's",
  );
  t.notOk(whole.some((a) => a.recipient === "carol@c.example" || a.connection_id === w.conns.PC));
  t.ok(
    whole.every((a) => a.channel === "email" && a.webhook_id === null),
    "without webhooks, e-mails only (test/webhooks: the webhook rows)",
  );

  // filters
  const failures = await all(alice, "kind=failure", 1);
  t.same(
    failures.map((a) => a.connection_id),
    [w.conns.OA, w.conns.PA],
  );
  const pa = await all(alice, `connection_id=${w.conns.PA}`, 1);
  t.same(
    pa.map((a) => a.kind),
    ["anomaly", "failure"],
  );
  t.same(await all(alice, `connection_id=${w.conns.PA}&kind=recovery`, 10), []);
  const auditsOnly = await all(alice, "kind=audit", 3);
  t.ok(auditsOnly.length >= 6 && auditsOnly.every((a) => a.kind === "audit"), "alice's audits");

  // tenant isolation: carol sees her own only; an organization key its organization's only
  const carol = (await get(w.keys.carolPersonal, "/v1/alerts?limit=1000")).json().data as AlertRow[];
  t.ok(carol.length > 0);
  t.ok(
    carol.every((a) => a.recipient === "carol@c.example" && a.organization_id === null),
    "carol: only her account's alerts",
  );
  const orgA = (await get(w.keys.aliceOrgA, "/v1/alerts?limit=1000")).json().data as AlertRow[];
  t.ok(orgA.length > 0 && orgA.every((a) => a.organization_id === w.orgs.orgA.id), "org A key: org A's only");
  t.ok(
    orgA.some((a) => a.audit_event === "api_key_created"),
    "including the audit of its organization key",
  );
  const bobOrg = (await get(w.keys.bobOrgB, "/v1/alerts?limit=1000")).json().data as AlertRow[];
  t.ok(bobOrg.every((a) => a.organization_id === w.orgs.orgB.id));
  const dave = (await get(w.keys.davePersonal, "/v1/alerts?kind=failure")).json().data as AlertRow[];
  t.same(
    dave.map((a) => a.connection_id),
    [w.conns.OA],
    "a member sees the organization's alerts, not the owner's personal ones",
  );

  // bad input and another tenant's ids
  const cases: [string, string, number, string, RegExp][] = [
    [
      alice,
      "/v1/alerts?kind=reminder",
      400,
      "VALIDATION_ERROR",
      /^query\.kind: must be one of failure, recovery, audit, budget_warning, anomaly, invitation, acknowledged, escalation, slo_burn$/,
    ],
    [
      alice,
      "/v1/alerts?connection_id=PA",
      400,
      "VALIDATION_ERROR",
      /^query\.connection_id: must be a connection id/,
    ],
    [alice, "/v1/alerts?limit=1001", 400, "VALIDATION_ERROR", /^query\.limit: must be at most 1000$/],
    [alice, "/v1/alerts?recipient=x", 400, "VALIDATION_ERROR", /^query\.recipient: is not a known field$/],
    [alice, `/v1/alerts?connection_id=${w.conns.PC}`, 403, "FORBIDDEN", /No access to connection/],
    [alice, "/v1/alerts?connection_id=00000000-0000-4000-8000-000000000000", 404, "NOT_FOUND", /not found/],
    [w.keys.aliceReadOnly, "/v1/alerts", 403, "FORBIDDEN", /analytics:read/],
  ];
  for (const [key, url, status, code, message] of cases) {
    const r = await get(key, url);
    t.equal(r.statusCode, status, url, { body: r.body });
    t.match(r.json(), { success: false, error: { code, message } }, url);
  }
  const first = (await get(alice, "/v1/alerts?kind=failure&limit=1")).json();
  const foreign = await get(
    alice,
    `/v1/alerts?kind=anomaly&limit=1&cursor=${encodeURIComponent(first.pagination.next_cursor)}`,
  );
  t.equal(foreign.statusCode, 400);
  t.equal(foreign.json().error.code, "INVALID_CURSOR", "a cursor is bound to its filters");
  const elsewhere = await get(
    alice,
    `/v1/incidents?limit=1&cursor=${encodeURIComponent(first.pagination.next_cursor)}`,
  );
  t.equal(elsewhere.json().error?.code, "INVALID_CURSOR", "and to its endpoint");
});
