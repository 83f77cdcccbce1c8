import t from "tap";
import { addMember, createOrg, createUser } from "../../src/identity/accounts.js";
import { dayStart, rollUp } from "../../src/retention/rollups.js";
import { availabilityDaily, availabilitySamples } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { FormClient as Browser } from "../helpers/dashboard.js";

/**
 * The connections pages answered in-process (app.inject) on PGlite: the list with its uptime bars
 * (rolled-up days and today's raw samples), the add form's messages (the API's, next to the
 * fields, 400, nothing created), CSRF, edit keeping stored credentials, the gateway's ingestion
 * key shown once, another tenant's ids (404, nothing changed), a member deleting an
 * organization's connection (403, nothing changed), the connection page's ranges. The browser
 * test (test/browser/connections.test.ts) drives the same pages in Chromium.
 */

const DAY = 86_400_000;

t.test("connections pages: list, bars, forms, rules", async (t) => {
  const { app, ctx } = await testApp(t);
  const db = ctx.stores.db;
  const owner = await createUser(db, {
    email: "a@conn.example",
    password: "password a1",
    plan: "enterprise",
  });
  await createUser(db, { email: "b@conn.example", password: "password b1", plan: "enterprise" });
  const member = await createUser(db, {
    email: "m@conn.example",
    password: "password m1",
    plan: "enterprise",
  });
  const org = await createOrg(db, { name: "Acme Ops", owner: owner.id, plan: "enterprise" });
  await addMember(db, { org: org.id, user: member.id, role: "member" });
  const count = async () =>
    Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM connections")).rows[0]?.n);

  const a = new Browser(app);
  await a.signIn("a@conn.example", "password a1");

  const empty = await a.get("/connections");
  t.equal(empty.statusCode, 200);
  t.match(empty.body, /No connections yet/);
  t.match(empty.body, /href="\/connections\/new"/, "an Add connection button");

  // bad input: the API's messages next to the fields, 400, nothing created
  const badUrl = await a.post(
    "/connections/new",
    { service_type: "workflow_a", service_name: "n8n prod", base_url: "ftp://x", api_key: "k" },
    "/connections/new",
  );
  t.equal(badUrl.statusCode, 400, "a bad base_url is a 400");
  t.match(
    badUrl.body,
    /id="base_url"[^>]*aria-invalid="true"[^>]*aria-describedby="base_url-hint base_url-error"/,
  );
  t.match(badUrl.body, /id="base_url-error">must be an http or https URL</);
  t.match(badUrl.body, /value="n8n prod"/, "the values are kept");
  t.notMatch(badUrl.body, /value="k"/, "the credential is not echoed back");
  const noKey = await a.post(
    "/connections/new",
    { service_type: "workflow_a", service_name: "n8n prod", base_url: "https://n8n.example.com" },
    "/connections/new",
  );
  t.equal(noKey.statusCode, 400);
  t.match(noKey.body, /id="api_key-error">is required for workflow_a connections</);
  const tooFast = await a.post(
    "/connections/new",
    {
      service_type: "workflow_a",
      service_name: "n8n prod",
      base_url: "https://n8n.example.com",
      api_key: "k",
      check_interval_seconds: "5",
    },
    "/connections/new",
  );
  t.equal(tooFast.statusCode, 400);
  t.match(tooFast.body, /id="check_interval_seconds-error">must be at least 10 on the enterprise plan</);
  const longName = await a.post(
    "/connections/new",
    {
      service_type: "workflow_a",
      service_name: "x".repeat(3000),
      base_url: "https://n.example",
      api_key: "k",
    },
    "/connections/new",
  );
  t.equal(longName.statusCode, 400, "an oversized name is a 400");
  t.match(longName.body, /id="service_name-error">must be at most 200 characters</);
  const huge = await a.post(
    "/connections/new",
    { service_type: "workflow_a", service_name: "x".repeat(20_000) },
    "/connections/new",
  );
  t.equal(huge.statusCode, 413, "a form over 16 KiB is a 413");
  const noCsrf = await a.post("/connections/new", {
    service_type: "workflow_a",
    service_name: "no csrf",
    base_url: "https://n.example",
    api_key: "k",
  });
  t.equal(noCsrf.statusCode, 403, "no CSRF token: 403");
  t.equal(await count(), 0, "nothing was created");

  // a good one
  const made = await a.post(
    "/connections/new",
    {
      service_type: "workflow_a",
      service_name: "n8n prod",
      base_url: "https://n8n.example.com",
      api_key: "secret-key-1",
      check_interval_seconds: "10",
    },
    "/connections/new",
  );
  t.equal(made.statusCode, 303);
  const id =
    /^\/connections\/([0-9a-f-]{36})\?notice=created$/.exec(String(made.headers.location))?.[1] ?? "";
  t.ok(id, "goes to the new connection's page");
  t.equal(await count(), 1);
  const stored = async () =>
    (
      await db.query<{ api_key_enc: string; service_name: string; check_interval_seconds: number | null }>(
        "SELECT api_key_enc, service_name, check_interval_seconds FROM connections WHERE id = $1",
        [id],
      )
    ).rows[0];
  const before = await stored();
  t.equal(before?.check_interval_seconds, 10);

  // samples: 3 rolled-up days and today from raw samples (the rollup has not run for today)
  const today = dayStart(ctx.now());
  await ctx.stores.series.append(availabilityDaily, [
    {
      ts: new Date(today.getTime() - 2 * DAY),
      connection_id: id,
      checks: 1440,
      available: 1438,
      response_ms_sum: 144000,
      response_ms_count: 1440,
    },
    {
      ts: new Date(today.getTime() - 3 * DAY),
      connection_id: id,
      checks: 1000,
      available: 950,
      response_ms_sum: 0,
      response_ms_count: 0,
    },
  ]);
  await db.query(
    "INSERT INTO rollup_state (id, rolled_through) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET rolled_through = $1",
    [today.toISOString()],
  );
  const nowMs = ctx.now().getTime();
  await ctx.stores.series.append(
    availabilitySamples,
    [0, 1, 2, 3].map((i) => ({
      ts: new Date(Math.max(today.getTime(), nowMs - (i + 1) * 10_000)),
      connection_id: id,
      available: true,
      response_time_ms: 40 + i,
      status_code: 200,
      synthetic: false,
      source: "probe",
    })),
  );
  const list = await a.get("/connections");
  t.equal(list.statusCode, 200);
  const row = new RegExp(`<tr data-id="${id}">.*?</tr>`, "s").exec(list.body)?.[0] ?? "";
  t.match(row, /n8n prod/);
  t.match(row, /<span class="badge inactive">inactive<\/span>/);
  t.match(row, /<time datetime="[^"]+" data-local>/, "the last check");
  t.match(row, /4\d ms/, "its response time");
  const cells = row.match(/<i[ >]/g) ?? [];
  t.equal(cells.length, 90, "90 cells");
  const iso = (d: number) => new Date(d).toISOString().slice(0, 10);
  t.match(
    row,
    new RegExp(`<i class=o title="${iso(today.getTime())}: 100% \\(4/4\\)"></i></div>`),
    "today's cell from raw samples, last",
  );
  t.match(
    row,
    new RegExp(`<i class=w title="${iso(today.getTime() - 2 * DAY)}: 99.86% \\(1,438/1,440\\)">`),
    "a rolled-up day, warn",
  );
  t.match(
    row,
    new RegExp(`<i class=b title="${iso(today.getTime() - 3 * DAY)}: 95% \\(950/1,000\\)">`),
    "a bad day",
  );
  t.match(
    row,
    new RegExp(`<i title="${iso(today.getTime() - 89 * DAY)}: no data"></i>`),
    "the first day: no data, grey",
  );
  t.match(row, /role="img" aria-label="90-day uptime 97\.\d+%"/, "the bar's accessible name");

  // once the rollup job ran today: today is its partial row plus the samples after the run
  await rollUp(ctx);
  await new Promise((r) => setTimeout(r, 5));
  await ctx.stores.series.append(availabilitySamples, [
    {
      ts: new Date(),
      connection_id: id,
      available: false,
      response_time_ms: 900,
      status_code: 500,
      synthetic: false,
      source: "probe",
    },
  ]);
  const rolledRow =
    new RegExp(`<tr data-id="${id}">.*?</tr>`, "s").exec((await a.get("/connections")).body)?.[0] ?? "";
  t.match(
    rolledRow,
    new RegExp(`<i class=b title="${iso(today.getTime())}: 80% \\(4/5\\)"></i></div>`),
    "today after a rollup run: the run's 4 checks and the failed one after it",
  );

  // filters
  t.match((await a.get("/connections?service_type=gateway")).body, /No connection matches these filters/);
  t.match((await a.get("/connections?service_type=workflow_a")).body, /n8n prod/);
  t.match((await a.get(`/connections?organization_id=${org.id}`)).body, /No connection matches/);
  const badFilter = await a.get("/connections?status=bogus");
  t.equal(badFilter.statusCode, 400);
  t.match(badFilter.body, /id="f-status-error">must be one of active, inactive, error</);

  // the connection page and its ranges
  for (const range of ["24h", "7d", "30d", "90d"]) {
    const p = await a.get(`/connections/${id}?range=${range}`);
    t.equal(p.statusCode, 200, `range ${range}`);
    t.match(p.body, /<script type="application\/json" id="rt-data">\{"range":/);
    t.match(p.body, /<div class="chart" id="rt-chart" data-chart="rt-data"/);
    t.match(p.body, /src="\/assets\/uplot\.min\.js"/);
  }
  const day = await a.get(`/connections/${id}?range=24h`);
  t.match(day.body, /id="uptime-value">80%</, "24 hours: 4 of 5 checks");
  t.match(day.body, /id="recent-incidents"|id="no-open-incidents"/);
  const month = await a.get(`/connections/${id}?range=90d`);
  t.match(month.body, /id="uptime-value">97\.\d+%</, "90 days from the rollups and today's samples");
  t.equal((await a.get(`/connections/${id}?range=1y`)).statusCode, 400, "an unknown range is a 400");
  t.equal((await a.get("/connections/not-an-id")).statusCode, 404);
  t.equal((await a.get("/connections/00000000-0000-4000-8000-000000000000")).statusCode, 404);

  // edit: the credential field is empty, the stored key kept
  const edit = await a.get(`/connections/${id}/edit`);
  t.equal(edit.statusCode, 200);
  t.match(
    edit.body,
    /id="api_key" name="api_key" type="password" placeholder="•••• stored; type to replace"/,
  );
  t.notMatch(edit.body, /secret-key-1/);
  const saved = await a.post(
    `/connections/${id}/edit`,
    {
      service_name: "n8n production",
      base_url: "https://n8n.example.com",
      api_key: "",
      check_interval_seconds: "10",
      organization_id: "personal",
    },
    `/connections/${id}/edit`,
  );
  t.equal(saved.statusCode, 303);
  t.equal(saved.headers.location, `/connections/${id}?notice=updated`);
  const after = await stored();
  t.equal(after?.service_name, "n8n production");
  t.equal(after?.api_key_enc, before?.api_key_enc, "the stored key is kept");
  const badEdit = await a.post(
    `/connections/${id}/edit`,
    { service_name: "n8n production", base_url: "nope", check_interval_seconds: "10" },
    `/connections/${id}/edit`,
  );
  t.equal(badEdit.statusCode, 400);
  t.match(badEdit.body, /id="base_url-error">must be an http or https URL</);
  t.equal((await stored())?.service_name, "n8n production");

  // another tenant: 404 everywhere, nothing changed
  const b = new Browser(app);
  await b.signIn("b@conn.example", "password b1");
  t.equal((await b.get(`/connections/${id}`)).statusCode, 404);
  t.notMatch((await b.get(`/connections/${id}`)).body, /n8n production/);
  t.equal((await b.get(`/connections/${id}/edit`)).statusCode, 404);
  t.equal(
    (await b.post(`/connections/${id}/edit`, { service_name: "taken" }, "/connections/new")).statusCode,
    404,
  );
  t.equal((await b.post(`/connections/${id}/delete`, {}, "/connections/new")).statusCode, 404);
  t.equal((await stored())?.service_name, "n8n production", "nothing changed");
  t.notMatch((await b.get("/connections")).body, /n8n production/, "nor is it listed");

  // an organization's connection: a member may edit it, not delete it
  const orgMade = await a.post(
    "/connections/new",
    {
      service_type: "workflow_b",
      service_name: "make eu",
      api_token: "tok",
      region: "eu1",
      organization_id: org.id,
    },
    "/connections/new?kind=workflow_b",
  );
  t.equal(orgMade.statusCode, 303);
  const orgId = /\/connections\/([0-9a-f-]{36})/.exec(String(orgMade.headers.location))?.[1] ?? "";
  const m = new Browser(app);
  await m.signIn("m@conn.example", "password m1");
  t.equal((await m.get(`/connections/${orgId}`)).statusCode, 200, "a member sees it");
  const denied = await m.post(`/connections/${orgId}/delete`, {}, `/connections/${orgId}/edit`);
  t.equal(denied.statusCode, 403, "a member cannot delete it");
  t.match(denied.body, /needs the admin or owner role/);
  t.equal(await count(), 2, "nothing deleted");

  // a gateway: its ingestion key shown once; the same form sent again creates nothing
  const tokens = await a.tokens("/connections/new?kind=gateway");
  const gw = { ...tokens, service_type: "gateway", service_name: "llm gw", heartbeat_interval_seconds: "60" };
  const gwMade = await a.post("/connections/new", gw);
  t.equal(gwMade.statusCode, 201);
  t.match(gwMade.body, /<p class="secret" id="ingest-key">vgi_[A-Za-z0-9_-]+<\/p>/);
  t.match(gwMade.body, /data-copy="ingest-key"/);
  t.equal(gwMade.headers["cache-control"], "no-store");
  const again = await a.post("/connections/new", gw);
  t.equal(again.statusCode, 409);
  t.notMatch(again.body, /vgi_/);
  t.equal(await count(), 3);

  // the gateway's page: spend by model and the budget; a workflow_b page: executions
  const gwId = (await db.query<{ id: string }>("SELECT id FROM connections WHERE service_name = 'llm gw'"))
    .rows[0]?.id;
  const gwPage = await a.get(`/connections/${gwId}`);
  t.equal(gwPage.statusCode, 200);
  t.match(gwPage.body, /Usage and cost, last 30 days/);
  t.match(gwPage.body, /id="gateway-spend">\$0\.00</);
  t.match(gwPage.body, /No monthly budget set/);
  t.notMatch(gwPage.body, /Recent executions/);
  const wbPage = await a.get(`/connections/${orgId}`);
  t.match(wbPage.body, /Recent executions/);
  t.match(wbPage.body, /Organization: Acme Ops/);

  // no CSRF token on edit or delete: 403, nothing changed
  t.equal((await a.post(`/connections/${id}/delete`, {})).statusCode, 403);
  t.equal((await a.post(`/connections/${id}/edit`, { service_name: "no token" })).statusCode, 403);
  t.equal((await stored())?.service_name, "n8n production");

  // delete with the owner's session
  const gone = await a.post(`/connections/${id}/delete`, {}, `/connections/${id}/edit`);
  t.equal(gone.statusCode, 303);
  t.equal(gone.headers.location, "/connections?notice=deleted");
  t.equal(await count(), 2);
  t.match((await a.get("/connections?notice=deleted")).body, /The connection was deleted/);
});
