import t from "tap";
import { PERMISSIONS } from "../../src/core/actor.js";
import { addMember, createKey } from "../../src/identity/accounts.js";
import { call } from "../helpers/tenants.js";
import { budgetWorld } from "./fixtures/world.js";

/** PUT/GET of connection and account budgets: shapes, removal, bad input, tenants and roles (PGlite). */

const ABSENT = "00000000-0000-4000-8000-000000000000";

t.test("a connection's budget: PUT and GET answer the same shape; null removes it", async (t) => {
  const bw = await budgetWorld(t);
  if (!bw) return;
  const { app, w } = bw;
  const { PA } = w.conns;
  const alice = w.keys.alicePersonal;
  bw.setNow("2026-11-16T00:00:00Z"); // 15 of 30 days gone: the run rate doubles the spend
  await bw.entry(PA, 2_000); // $20

  const unset = await call(app, alice, "GET", `/v1/connections/${PA}/budget`);
  t.equal(unset.statusCode, 200);
  t.same(unset.json(), {
    connection_id: PA,
    monthly_budget_usd: null,
    month: "2026-11",
    spent_usd: 20,
    percent_used: null,
    projected_usd: 40,
  });

  const put = await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: 250 });
  t.equal(put.statusCode, 200, put.body);
  const expected = {
    connection_id: PA,
    monthly_budget_usd: 250,
    month: "2026-11",
    spent_usd: 20,
    percent_used: 8,
    projected_usd: 40,
  };
  t.same(put.json(), expected, "PUT answers the figures");
  t.same((await call(app, alice, "GET", `/v1/connections/${PA}/budget`)).json(), expected, "GET the same");

  const cents = await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: 19.99 });
  t.equal(cents.json().monthly_budget_usd, 19.99, "whole cents are kept exactly");

  // the organization key of org A sees and may budget org A's connection
  const org = await call(app, w.keys.aliceOrgA, "PUT", `/v1/connections/${w.conns.OA}/budget`, {
    monthly_budget_usd: 75.5,
  });
  t.equal(org.statusCode, 200);
  t.equal(org.json().monthly_budget_usd, 75.5);

  const removed = await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: null });
  t.equal(removed.statusCode, 200);
  t.same(removed.json(), { ...expected, monthly_budget_usd: null, percent_used: null });
  t.equal((await call(app, alice, "GET", `/v1/connections/${PA}/budget`)).json().monthly_budget_usd, null);
  const again = await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: null });
  t.equal(again.statusCode, 200, "removing an absent budget is not an error");
});

t.test("bad budget amounts and fields: 400 naming the field, never a 500", async (t) => {
  const bw = await budgetWorld(t);
  if (!bw) return;
  const { app, w } = bw;
  const alice = w.keys.alicePersonal;
  const conn = `/v1/connections/${w.conns.PA}/budget`;
  const usdHint = /send US dollars as a number in monthly_budget_usd/;
  const cases: [string, unknown, RegExp][] = [
    ["a string with a unit", { monthly_budget_usd: "250 USD" }, usdHint],
    ["a numeric string", { monthly_budget_usd: "250" }, /monthly_budget_usd: must be a number, not a string/],
    [
      "cents",
      { monthly_budget_cents: 25_000 },
      /body\.monthly_budget_cents: budgets are set in US dollars, not cents/,
    ],
    ["cents beside dollars", { monthly_budget_usd: 250, budget_cents: 1 }, /body\.budget_cents: .*not cents/],
    ["negative", { monthly_budget_usd: -5 }, /body\.monthly_budget_usd: must not be negative/],
    ["zero", { monthly_budget_usd: 0 }, /must be more than 0; send null to remove/],
    ["absurd", { monthly_budget_usd: 10_000_000.01 }, /must be at most 10000000 \(US dollars\)/],
    ["not finite", '{"monthly_budget_usd": 1e999}', /must be a finite number/],
    ["fractions of a cent", { monthly_budget_usd: 10.001 }, /whole cents/],
    ["a boolean", { monthly_budget_usd: true }, /must be a number/],
    ["an object", { monthly_budget_usd: { amount: 250, currency: "USD" } }, /must be a number/],
    [
      "an unknown field",
      { monthly_budget_usd: 250, currency: "USD" },
      /body\.currency: is not a known field/,
    ],
    ["another name", { budget: 250 }, /body\.budget: is not a known field: send US dollars/],
    ["missing", {}, /body\.monthly_budget_usd: is required/],
    ["an array", [250], /body: must be a JSON object/],
    ["a bare number", "250", /body: must be a JSON object/],
  ];
  for (const [what, body, message] of cases) {
    const send = (url: string) =>
      app.inject({
        method: "PUT",
        url,
        headers: { authorization: `Bearer ${alice}`, "content-type": "application/json" },
        payload: typeof body === "string" ? body : JSON.stringify(body),
      });
    const simple = await send(conn);
    t.equal(simple.statusCode, 400, `${what}: 400`);
    t.match(simple.json(), { error: message }, `${what}: {error} names the problem`);
    const envelope = await send("/v1/budget");
    t.equal(envelope.statusCode, 400, `${what}: 400 on the account budget`);
    t.match(
      envelope.json(),
      { success: false, error: { code: "VALIDATION_ERROR", message } },
      `${what}: the envelope on the account budget`,
    );
  }
  const empty = await app.inject({ method: "PUT", url: conn, headers: { authorization: `Bearer ${alice}` } });
  t.equal(empty.statusCode, 400, "no body at all: 400");
  const malformed = await app.inject({
    method: "PUT",
    url: conn,
    headers: { authorization: `Bearer ${alice}`, "content-type": "application/json" },
    payload: '{"monthly_budget_usd": 25',
  });
  t.equal(malformed.statusCode, 400, "malformed JSON: 400");
  const badId = await call(app, alice, "PUT", "/v1/connections/not-a-uuid/budget", { monthly_budget_usd: 1 });
  t.equal(badId.statusCode, 400);
  t.match(badId.json(), { error: /params\.id/ });
  const stored = await call(app, alice, "GET", conn);
  t.equal(stored.json().monthly_budget_usd, null, "nothing was stored by any of them");
  t.equal(
    (await call(app, alice, "PUT", conn, { monthly_budget_usd: 10_000_000 })).statusCode,
    200,
    "the cap itself is accepted",
  );
});

t.test(
  "tenants: another tenant's connection 403, an absent one 404, as the connection endpoints",
  async (t) => {
    const bw = await budgetWorld(t);
    if (!bw) return;
    const { app, w } = bw;
    const alice = w.keys.alicePersonal;
    for (const method of ["GET", "PUT"] as const) {
      const body = method === "PUT" ? { monthly_budget_usd: 5 } : undefined;
      const foreign = await call(app, alice, method, `/v1/connections/${w.conns.PC}/budget`, body);
      t.equal(foreign.statusCode, 403, `${method} carol's connection`);
      t.same(foreign.json(), { error: "You do not have access to this connection" });
      const absent = await call(app, alice, method, `/v1/connections/${ABSENT}/budget`, body);
      t.equal(absent.statusCode, 404, `${method} an absent connection`);
      t.same(absent.json(), { error: "Connection not found" });
      // an organization key sees only its organization: alice's own personal connection is not its
      const orgKey = await call(app, w.keys.aliceOrgA, method, `/v1/connections/${w.conns.PA}/budget`, body);
      t.equal(orgKey.statusCode, 403, `${method} with org A's key on a personal connection`);
    }
    const noWrite = await call(app, w.keys.aliceReadOnly, "PUT", `/v1/connections/${w.conns.PA}/budget`, {
      monthly_budget_usd: 5,
    });
    t.equal(noWrite.statusCode, 403, "PUT needs connections:write");
    const noUsageRead = (
      await createKey(bw.ctx.stores.db, {
        user: w.users.alice.id,
        permissions: PERMISSIONS.filter((p) => p !== "usage:read"),
      })
    ).key;
    t.equal(
      (await call(app, noUsageRead, "GET", `/v1/connections/${w.conns.PA}/budget`)).statusCode,
      403,
      "GET needs usage:read",
    );
    const ingest = await call(app, w.keys.ingest, "GET", `/v1/connections/${w.conns.OB}/budget`);
    t.equal(ingest.statusCode, 403, "a usage-ingestion key cannot read budgets");
    t.equal(
      (await call(app, w.keys.bobPersonal, "GET", `/v1/connections/${w.conns.PC}/budget`)).statusCode,
      403,
      "bob cannot read carol's",
    );
  },
);

t.test("the account budget: a personal key's user, an organization key's organization", async (t) => {
  const bw = await budgetWorld(t);
  if (!bw) return;
  const { app, w, ctx } = bw;
  const db = ctx.stores.db;
  bw.setNow("2026-11-11T00:00:00Z"); // 10 of 30 days: the run rate triples the spend
  await bw.entry(w.conns.PA, 1_000); // alice personal: $10
  await bw.entry(w.conns.OA, 250); // org A: $2.50
  await bw.heartbeat(1.25); // org B's gateway: $1.25
  await bw.entry(w.conns.PB, 500, w.keys.bobPersonal); // bob personal: $5

  const personal = await call(app, w.keys.alicePersonal, "GET", "/v1/budget");
  t.equal(personal.statusCode, 200);
  t.same(personal.json(), {
    account_type: "user",
    account_id: w.users.alice.id,
    connection_count: 1,
    monthly_budget_usd: null,
    month: "2026-11",
    spent_usd: 10,
    percent_used: null,
    projected_usd: 30,
  });
  const set = await call(app, w.keys.alicePersonal, "PUT", "/v1/budget", { monthly_budget_usd: 40 });
  t.equal(set.statusCode, 200);
  t.match(set.json(), { account_type: "user", monthly_budget_usd: 40, spent_usd: 10, percent_used: 25 });

  // org A: alice is its owner; her org key sets org A's budget, which is not her personal one
  const orgA = await call(app, w.keys.aliceOrgA, "PUT", "/v1/budget", { monthly_budget_usd: 5 });
  t.equal(orgA.statusCode, 200, orgA.body);
  t.same(orgA.json(), {
    account_type: "organization",
    account_id: w.orgs.orgA.id,
    connection_count: 1,
    monthly_budget_usd: 5,
    month: "2026-11",
    spent_usd: 2.5,
    percent_used: 50,
    projected_usd: 7.5,
  });
  t.equal((await call(app, w.keys.alicePersonal, "GET", "/v1/budget")).json().monthly_budget_usd, 40);

  // org B's spend is its gateway's heartbeats
  const orgB = await call(app, w.keys.bobOrgB, "GET", "/v1/budget");
  t.match(orgB.json(), { account_type: "organization", account_id: w.orgs.orgB.id, spent_usd: 1.25 });
  t.match((await call(app, w.keys.bobPersonal, "GET", "/v1/budget")).json(), {
    account_type: "user",
    account_id: w.users.bob.id,
    spent_usd: 5,
  });

  // dave: an org A key made while admin, then demoted to member: may read, may not set
  await addMember(db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "admin" });
  const daveOrg = (
    await createKey(db, { user: w.users.dave.id, org: w.orgs.orgA.id, permissions: [...PERMISSIONS] })
  ).key;
  await addMember(db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "member" });
  const read = await call(app, daveOrg, "GET", "/v1/budget");
  t.equal(read.statusCode, 200);
  t.equal(read.json().monthly_budget_usd, 5, "a member reads the organization's budget");
  const refused = await call(app, daveOrg, "PUT", "/v1/budget", { monthly_budget_usd: 1_000 });
  t.equal(refused.statusCode, 403);
  t.match(refused.json(), {
    success: false,
    error: { code: "FORBIDDEN", message: /admins and owners .* is a member/ },
  });
  t.equal((await call(app, daveOrg, "GET", "/v1/budget")).json().monthly_budget_usd, 5, "unchanged");
  // dave's personal key sets dave's own (empty) account
  const davePersonal = await call(app, w.keys.davePersonal, "PUT", "/v1/budget", { monthly_budget_usd: 1 });
  t.match(davePersonal.json(), {
    account_type: "user",
    account_id: w.users.dave.id,
    connection_count: 0,
    spent_usd: 0,
  });

  t.equal(
    (await call(app, w.keys.aliceReadOnly, "PUT", "/v1/budget", { monthly_budget_usd: 1 })).statusCode,
    403,
    "PUT /v1/budget needs connections:write",
  );
  t.equal((await call(app, w.keys.ingest, "GET", "/v1/budget")).statusCode, 403, "not an ingestion key");
  t.equal((await call(app, null, "GET", "/v1/budget")).statusCode, 401);

  const removed = await call(app, w.keys.aliceOrgA, "PUT", "/v1/budget", { monthly_budget_usd: null });
  t.match(removed.json(), { account_type: "organization", monthly_budget_usd: null, percent_used: null });
});
