import t from "tap";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";
import { keyStore } from "../../src/identity/keys.js";

t.test("connections: create, list, get, update, delete as the spec shapes them", async (t) => {
  const ta = await testApp(t);
  const { app, ctx } = ta;
  const w = await seedTenants(ta);
  const key = w.keys.alicePersonal;

  const list = await call(app, key, "GET", "/v1/connections");
  const body = list.json();
  t.same(body.pagination, { total: 2, limit: 50, offset: 0, has_more: false });
  const [newest, older] = body.connections;
  t.equal(newest.id, w.conns.OA, "newest first");
  t.same(newest, {
    id: w.conns.OA,
    service_type: "workflow_b",
    service_name: "org A make",
    status: "inactive",
    base_url: null,
    api_key: null,
    api_token: "********",
    region: "eu1",
    team_id: null,
    organization_id: w.orgs.orgA.id,
    organizations: { id: w.orgs.orgA.id, name: "Org A" },
    configuration: null,
    created_at: newest.created_at,
    _credential_lengths: { api_key: 0, api_token: "secret-token-OA-91bc".length },
    check_interval_seconds: null,
    failure_threshold: null,
    heartbeat_interval_seconds: null,
    heartbeat_grace_seconds: null,
    last_sync_at: null,
  });
  t.equal(older.organizations, null, "a personal connection has no organization");
  t.equal(older.api_key, "********");

  const one = await call(app, key, "GET", `/v1/connections/${w.conns.PA}`);
  t.same(Object.keys(one.json()).sort(), [
    "api_key",
    "base_url",
    "created_at",
    "id",
    "organization_id",
    "service_name",
    "service_type",
    "status",
  ]);

  // filters and paging
  const filtered = await call(app, key, "GET", "/v1/connections?service_type=workflow_a&status=inactive");
  t.same(
    filtered.json().connections.map((c: { id: string }) => c.id),
    [w.conns.PA],
  );
  const personal = await call(app, key, "GET", "/v1/connections?organization_id=personal");
  t.same(
    personal.json().connections.map((c: { id: string }) => c.id),
    [w.conns.PA],
  );
  const inOrg = await call(app, key, "GET", `/v1/connections?organization_id=${w.orgs.orgA.id}`);
  t.same(
    inOrg.json().connections.map((c: { id: string }) => c.id),
    [w.conns.OA],
  );
  const page = await call(app, key, "GET", "/v1/connections?limit=1&offset=0");
  t.same(page.json().pagination, { total: 2, limit: 1, offset: 0, has_more: true });
  const page2 = await call(app, key, "GET", "/v1/connections?limit=1&offset=1");
  t.same(page2.json().pagination, { total: 2, limit: 1, offset: 1, has_more: false });

  // gateway: an ingestion key, once
  const gw = await call(app, key, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "gw",
    configuration: { a: [1, 2] },
  });
  t.equal(gw.statusCode, 201);
  t.match(gw.json(), {
    message: String,
    connection: { service_type: "gateway", status: "inactive" },
    ingest_api_key: /^vgi_/,
  });
  const n8n = await call(app, key, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "x",
    base_url: "https://n8n.example",
    api_key: "k".repeat(40),
    organization_id: "personal",
  });
  t.equal(n8n.json().ingest_api_key, null);

  // credentials are encrypted at rest
  const stored = await ctx.stores.db.query<{ api_key_enc: string }>(
    "SELECT api_key_enc FROM connections WHERE id = $1",
    [n8n.json().connection.id],
  );
  t.match(stored.rows[0]?.api_key_enc, /^v1\.[0-9a-f]{12}\./);
  t.notOk(stored.rows[0]?.api_key_enc.includes("kkkk"));

  // update: rename, rotate a credential, move to an organization
  const id = n8n.json().connection.id;
  const renamed = await call(app, key, "PUT", `/v1/connections/${id}`, { service_name: "renamed" });
  t.equal(renamed.statusCode, 200);
  t.same(renamed.json().message, "Connection updated");
  t.equal(renamed.json().connection.service_name, "renamed");
  await ctx.stores.db.query("UPDATE connections SET status = 'active' WHERE id = $1", [id]);
  const rotated = await call(app, key, "PUT", `/v1/connections/${id}`, { api_key: "new-key-123" });
  t.equal(rotated.json().connection.status, "inactive", "a new credential must be confirmed again");
  const lengths = (await call(app, key, "GET", "/v1/connections?service_type=workflow_a"))
    .json()
    .connections.find((c: { id: string }) => c.id === id)._credential_lengths;
  t.same(lengths, { api_key: 11, api_token: 0 });
  const moved = await call(app, key, "PUT", `/v1/connections/${id}`, { organization_id: w.orgs.orgA.id });
  t.equal(moved.json().connection.organization_id, w.orgs.orgA.id);
  t.equal(
    (await call(app, w.keys.davePersonal, "GET", `/v1/connections/${id}`)).statusCode,
    200,
    "org members now see it",
  );
  const back = await call(app, w.keys.davePersonal, "PUT", `/v1/connections/${id}`, {
    organization_id: "personal",
  });
  t.equal(back.statusCode, 403, "a member may not take it out of the organization (as with a delete)");
  t.match(back.json(), { error: /admin or owner role/ });
  const home = await call(app, key, "PUT", `/v1/connections/${id}`, { organization_id: "personal" });
  t.equal(home.statusCode, 200, "the owner (alice) may");
  t.equal(
    (await call(app, w.keys.davePersonal, "GET", `/v1/connections/${id}`)).statusCode,
    403,
    "made personal: alice's, out of the members' view",
  );
  t.equal((await call(app, key, "GET", `/v1/connections/${id}`)).statusCode, 200, "alice still sees it");

  // delete: the bound ingestion key stops at once
  const gwId = gw.json().connection.id;
  const ingestKey = gw.json().ingest_api_key;
  t.not(await keyStore(ctx).authenticate(ingestKey), null);
  const del = await call(app, key, "DELETE", `/v1/connections/${gwId}`);
  t.equal(del.statusCode, 200);
  t.equal(await keyStore(ctx).authenticate(ingestKey), null, "the ingestion key no longer authenticates");
  const again = await call(app, key, "DELETE", `/v1/connections/${gwId}`);
  t.equal(again.statusCode, 404);
  t.same(again.json(), { error: "Connection not found" });
});

t.test("connections: bad input is a 400 naming the field, never a 500", async (t) => {
  const ta = await testApp(t);
  const { app } = ta;
  const w = await seedTenants(ta);
  const key = w.keys.alicePersonal;
  const post = (body: unknown) => call(app, key, "POST", "/v1/connections", body);
  const cases: [string, unknown, RegExp][] = [
    [
      "unknown service_type",
      { service_type: "zapier", service_name: "x" },
      /^body\.service_type: must be one of workflow_a, workflow_b, gateway$/,
    ],
    ["missing service_name", { service_type: "gateway" }, /^body\.service_name: /],
    ["wrong type", { service_type: "gateway", service_name: 42 }, /^body\.service_name: .*string/],
    [
      "workflow_a without base_url",
      { service_type: "workflow_a", service_name: "x", api_key: "k" },
      /^base_url: is required for workflow_a/,
    ],
    [
      "workflow_a without api_key",
      { service_type: "workflow_a", service_name: "x", base_url: "http://h" },
      /^api_key: is required for workflow_a/,
    ],
    [
      "workflow_b without api_token",
      { service_type: "workflow_b", service_name: "x" },
      /^api_token: is required for workflow_b/,
    ],
    [
      "foreign credential",
      { service_type: "workflow_b", service_name: "x", api_token: "t", api_key: "k" },
      /^api_key: is not used by workflow_b/,
    ],
    [
      "bad url",
      { service_type: "workflow_a", service_name: "x", base_url: "ftp://h", api_key: "k" },
      /^body\.base_url: must be an http or https URL/,
    ],
    [
      "unknown field",
      { service_type: "gateway", service_name: "x", colour: "red" },
      /^body\.colour: is not a known field/,
    ],
    [
      "bad organization id",
      { service_type: "gateway", service_name: "x", organization_id: "org-1" },
      /^body\.organization_id: /,
    ],
    ["not an object", [1, 2], /^body: /],
  ];
  for (const [name, body, message] of cases) {
    const r = await post(body);
    t.equal(r.statusCode, 400, name);
    t.match(r.json().error, message, name);
  }
  const malformed = await app.inject({
    method: "POST",
    url: "/v1/connections",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: '{"service_type":',
  });
  t.equal(malformed.statusCode, 400);
  t.match(malformed.json().error, /malformed JSON/);
  const notJson = await app.inject({
    method: "POST",
    url: "/v1/connections",
    headers: { authorization: `Bearer ${key}`, "content-type": "text/plain" },
    payload: "hello",
  });
  t.equal(notJson.statusCode, 415, "a body that is not JSON: 415 Unsupported Media Type");
  t.match(notJson.json().error, /Content-Type: application\/json/);
  const huge = await post({
    service_type: "gateway",
    service_name: "x",
    configuration: { blob: "x".repeat(1_100_000) },
  });
  t.equal(huge.statusCode, 413);

  const query = (q: string) => call(app, key, "GET", `/v1/connections?${q}`);
  for (const [q, message] of [
    ["limit=101", /query\.limit: must be at most 100/],
    ["limit=0", /query\.limit: must be at least 1/],
    ["limit=ten", /query\.limit: limit must be a whole number/],
    ["offset=-1", /query\.offset: must be at least 0/],
    ["status=broken", /query\.status: must be one of active, inactive, error/],
    ["service_type=x", /query\.service_type: must be one of/],
    ["colour=red", /query\.colour: is not a known field/],
  ] as const) {
    const r = await query(q);
    t.equal(r.statusCode, 400, q);
    t.match(r.json().error, message, q);
  }
  const notAnId = await call(app, key, "GET", "/v1/connections/not-an-id");
  t.equal(notAnId.statusCode, 400);
  t.match(notAnId.json().error, /params\.id: must be a connection or organization id/);

  // monitoring settings: within the plan's minimum, on the kind that uses them
  const interval = (body: Record<string, unknown>) =>
    post({ service_type: "workflow_a", service_name: "x", base_url: "http://h", api_key: "k", ...body });
  t.equal(
    (await interval({ check_interval_seconds: 10, failure_threshold: 5 })).statusCode,
    201,
    "enterprise allows 10 s",
  );
  t.match(
    (await interval({ check_interval_seconds: 5 })).json().error,
    /^check_interval_seconds: must be at least 10 on the enterprise plan$/,
  );
  t.match(
    (await interval({ failure_threshold: 0 })).json().error,
    /body\.failure_threshold: must be at least 1/,
  );
  t.match(
    (await interval({ heartbeat_interval_seconds: 30 })).json().error,
    /^heartbeat_interval_seconds: is only for gateway connections/,
  );
  t.match(
    (await post({ service_type: "gateway", service_name: "g", check_interval_seconds: 60 })).json().error,
    /^check_interval_seconds: gateways are not probed/,
  );
  t.equal(
    (
      await post({
        service_type: "gateway",
        service_name: "g",
        heartbeat_interval_seconds: 30,
        heartbeat_grace_seconds: 0,
      })
    ).statusCode,
    201,
  );

  const put = (body: unknown) => call(app, key, "PUT", `/v1/connections/${w.conns.PA}`, body);
  t.equal((await put({ check_interval_seconds: 45, failure_threshold: 2 })).statusCode, 200);
  const listed = (await call(app, key, "GET", "/v1/connections?service_type=workflow_a"))
    .json()
    .connections.find((c: { id: string }) => c.id === w.conns.PA);
  t.match(listed, { check_interval_seconds: 45, failure_threshold: 2 }, "listed");
  t.equal(
    (await put({ check_interval_seconds: null })).statusCode,
    200,
    "null returns to the plan's default",
  );
  t.match((await put({})).json().error, /body: name at least one field/);
  t.match((await put({ service_type: "gateway" })).json().error, /body\.service_type: cannot be changed/);
  t.match((await put({ api_token: "t" })).json().error, /api_token: is not used by workflow_a/);
  t.equal((await put({ service_name: "" })).statusCode, 400);
});
