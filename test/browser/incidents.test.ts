import { randomUUID } from "node:crypto";
import pg from "pg";
import type { Page } from "playwright-core";
import t from "tap";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { axe, browser, newPage, requireChromium, shot, signIn, vigil } from "./harness.js";

/**
 * A real incident in a real browser: `vigil serve` (on PostgreSQL, so the test can seed an
 * anomaly) checks a workflow_a connection every 10 s against the simulator; the simulator goes
 * down, two failed checks open an availability incident, and in Chromium the user finds it in
 * /incidents, opens it, acknowledges it with a note and sees the timeline say who; the REST API
 * agrees. A stale form then says it was already acknowledged; after the simulator recovers and
 * the incident resolves, another stale form gets the core's 409. Filters narrow the list,
 * another tenant's incident is a 404, a form without its CSRF token a 403, and the alert history
 * lists the failure alert and the key's audit. Every page is axe-clean in light and dark mode.
 */
t.setTimeout(300_000);

const ALICE = { email: "alice@incidents.example", password: "alice password 1" };
const BOB = { email: "bob@incidents.example", password: "bob password 1" };

async function until<T>(what: string, fn: () => Promise<T | null | undefined>, ms = 90_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Clicks a form's submit button and resolves with the status of the page it lands on (after any redirect). */
async function submit(page: Page, name: string | RegExp): Promise<number | undefined> {
  const [res] = await Promise.all([page.waitForNavigation(), page.getByRole("button", { name }).click()]);
  return res?.status();
}

t.test("an incident found, acknowledged in the browser, resolved; the alert history", async (t) => {
  if (!requireChromium(t)) return;
  if (!(await requireBackend(t, "postgres"))) return;
  const databaseUrl = await freshDatabaseUrl(t);
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  const v = await vigil(t, { DATABASE_URL: databaseUrl, ALERT_FAILURE_MAIL_INTERVAL_SECONDS: "0" });

  const alice = await v.admin(
    "create-user",
    "--email",
    ALICE.email,
    "--password",
    ALICE.password,
    "--plan",
    "enterprise",
  );
  const bob = await v.admin(
    "create-user",
    "--email",
    BOB.email,
    "--password",
    BOB.password,
    "--plan",
    "enterprise",
  );
  const key = String(
    (await v.admin("create-key", "--user", String(alice.id), "--name", "incident test")).key,
  );
  const bobKey = String((await v.admin("create-key", "--user", String(bob.id))).key);
  const api = async (path: string, k = key, init: RequestInit = {}) => {
    const r = await fetch(`${v.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${k}`, "content-type": "application/json" },
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const created = await api("/v1/connections", key, {
    method: "POST",
    body: JSON.stringify({
      service_type: "workflow_a",
      service_name: "shop n8n",
      base_url: sim.url,
      api_key: "sim-api-key",
      check_interval_seconds: 10,
      failure_threshold: 2,
    }),
  });
  t.equal(created.status, 201, "the connection is created");
  const connId = (created.body.connection as { id: string }).id;
  const bobConn = await api("/v1/connections", bobKey, {
    method: "POST",
    body: JSON.stringify({ service_type: "gateway", service_name: "bob gateway" }),
  });
  t.equal(bobConn.status, 201);

  await until("the connection to turn active", async () => {
    const c = await api(`/v1/connections/${connId}`);
    return (
      (c.body.connection as { status?: string } | undefined)?.status === "active" ||
      c.body.status === "active"
    );
  });
  // the platform goes down: 503 on every request; two failed checks open the incident
  await fetch(`${sim.url}/__sim/state`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fault: "down" }),
  });
  const incidentId = await until("an availability incident", async () => {
    const r = await api(`/v1/incidents?connection_id=${connId}&status=open`);
    return ((r.body.data as { id: string }[] | undefined) ?? [])[0]?.id;
  });

  const b = await browser(t);
  const { page, context } = await newPage(t, b);
  await signIn(page, v.url, ALICE.email, ALICE.password);

  // the list: the incident, open, with its connection
  const list = await page.goto(`${v.url}/incidents`);
  t.equal(list?.status(), 200);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Incidents");
  const row = page.locator(`tr[data-incident="${incidentId}"]`);
  t.equal(await row.locator(".badge").textContent(), "open", "the incident is listed, open");
  t.equal(
    await row.getByRole("link", { name: "shop n8n", exact: true }).getAttribute("href"),
    `/connections/${connId}`,
  );
  t.match(await row.locator("td").nth(7).textContent(), /\d+ s|\d+ min/, "its duration in words");
  await axe(t, page, "incidents list");
  await shot(page, "incidents");

  // filters narrow the list
  await page.getByLabel("Status").selectOption("resolved");
  t.equal(await submit(page, "Filter"), 200);
  t.match(page.url(), /status=resolved/);
  t.equal(await page.locator("tr[data-incident]").count(), 0, "no resolved incident yet");
  t.match(await page.locator("#incidents-empty").textContent(), /No incident matches these filters/);
  await page.getByLabel("Status").selectOption("open");
  await page.getByLabel("Kind").selectOption("availability");
  await page.getByLabel("Connection").selectOption(connId);
  await submit(page, "Filter");
  t.equal(
    await page.locator(`tr[data-incident="${incidentId}"]`).count(),
    1,
    "open availability of the connection",
  );
  await page.getByLabel("Kind").selectOption("budget");
  await submit(page, "Filter");
  t.equal(await page.locator("tr[data-incident]").count(), 0, "no budget incident");

  // two stale copies of the incident's page, opened before the acknowledgement
  const stale1 = await context.newPage();
  await stale1.goto(`${v.url}/incidents/${incidentId}`);
  const stale2 = await context.newPage();
  await stale2.goto(`${v.url}/incidents/${incidentId}`);

  await page.goto(`${v.url}/incidents`);
  await Promise.all([
    page.waitForNavigation(),
    page.locator(`tr[data-incident="${incidentId}"] td a`).first().click(),
  ]);
  t.match(page.url(), new RegExp(`/incidents/${incidentId}$`));
  t.equal(await page.locator("#incident-status").textContent(), "open");
  t.match(await page.locator("ol.timeline").textContent(), /Opened[\s\S]*2 consecutive failed checks/);
  t.match(
    await page.locator("ol.timeline").textContent(),
    /A failure alert was decided for 1 e-mail recipient/,
  );
  await axe(t, page, "an open incident");

  // without the CSRF token: 403, nothing changed
  const forged = await page.request.post(`${v.url}/incidents/${incidentId}/acknowledge`, {
    form: { note: "no token" },
    maxRedirects: 0,
  });
  t.equal(forged.status(), 403, "a form without its CSRF token: 403");
  t.match(await forged.text(), /nothing was changed/);
  t.equal((await api(`/v1/incidents/${incidentId}`)).body.status, "open", "still open");

  await page.getByLabel("Note (optional)").fill("restarting the instance");
  t.equal(await submit(page, "Acknowledge"), 200);
  t.match(page.url(), /notice=acknowledged/);
  t.match(await page.locator(".notice").textContent(), /The incident is acknowledged/);
  t.equal(
    await page.locator("#incident-status").textContent(),
    "acknowledged",
    "the page shows it acknowledged",
  );
  t.match(await page.locator("#incident-acknowledged").textContent(), new RegExp(`by ${ALICE.email}`));
  const ackEvent = page.locator('ol.timeline li[data-event="acknowledged"]');
  t.match(await ackEvent.textContent(), new RegExp(`Acknowledged by ${ALICE.email.replace(".", "\\.")}`));
  t.match(await ackEvent.locator("blockquote").textContent(), /restarting the instance/);
  t.equal(await page.getByRole("button", { name: "Acknowledge" }).count(), 0, "no button once acknowledged");
  await axe(t, page, "an acknowledged incident");
  await shot(page, "incident");

  const rest = await api(`/v1/incidents/${incidentId}`);
  t.equal(rest.body.status, "acknowledged", "GET /v1/incidents/:id agrees");
  const ack = (rest.body.events as { kind: string; detail: { by: unknown; note: string } }[]).find(
    (e) => e.kind === "acknowledged",
  );
  t.same(
    ack?.detail.by,
    { type: "user", user_id: alice.id, via: "session" },
    "the signed-in user, by session",
  );
  t.equal(ack?.detail.note, "restarting the instance");

  // a stale form: the first acknowledgement stands
  t.equal(await submit(stale1, "Acknowledge"), 200);
  t.match(await stale1.locator(".notice").textContent(), /already acknowledged; nothing changed/);
  const events = (await api(`/v1/incidents/${incidentId}`)).body.events as { kind: string }[];
  t.equal(events.filter((e) => e.kind === "acknowledged").length, 1, "one acknowledgement in the timeline");

  // another tenant's incident id: 404, in Bob's browser
  const { page: bobPage } = await newPage(t, b);
  await signIn(bobPage, v.url, BOB.email, BOB.password);
  const strange = await bobPage.goto(`${v.url}/incidents/${incidentId}`);
  t.equal(strange?.status(), 404, "another tenant's incident: 404");
  t.match(await bobPage.locator(".error").textContent(), new RegExp(`Incident ${incidentId} not found`));
  t.equal(await bobPage.locator("tr[data-incident]").count(), 0);
  await bobPage.goto(`${v.url}/incidents`);
  t.equal(await bobPage.locator("tr[data-incident]").count(), 0, "Bob's list does not show it");
  const bobPost = await bobPage.request.post(`${v.url}/incidents/${incidentId}/acknowledge`, {
    form: { _csrf: await bobPage.locator("input[name=_csrf]").first().inputValue() },
    maxRedirects: 0,
  });
  t.equal(bobPost.status(), 404, "Bob acknowledging it: 404");

  // the alert history: the incident's failure alert and the key's audit
  await page.goto(`${v.url}/alerts`);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Alert history");
  const failure = page.locator('tr[data-kind="failure"]');
  t.ok((await failure.count()) >= 1, "the failure alert is listed");
  t.match(await failure.first().textContent(), /shop n8n/);
  t.match(await failure.first().textContent(), new RegExp(ALICE.email.replace(".", "\\.")));
  t.match(await failure.first().locator(".badge").textContent(), /pending|sent|failed/);
  t.equal(
    await failure.first().getByRole("link", { name: "the incident" }).getAttribute("href"),
    `/incidents/${incidentId}`,
  );
  t.match(await page.locator('tr[data-kind="audit"]').first().textContent(), /API key created/);
  await axe(t, page, "alert history");
  await page.getByLabel("Kind").selectOption("audit");
  await submit(page, "Filter");
  t.equal(await page.locator('tr[data-kind="failure"]').count(), 0, "kind=audit: no failure rows");
  t.ok((await page.locator('tr[data-kind="audit"]').count()) >= 1);

  // anomalies: none yet, then one seeded in the database
  await page.goto(`${v.url}/anomalies`);
  t.match(await page.locator("#anomalies-empty").textContent(), /No anomalies detected/);
  await axe(t, page, "anomalies, empty");
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  await db.query(
    `INSERT INTO anomalies (id, connection_id, metric, status, detected_at, window_start, window_end, observed,
       baseline_mean, baseline_stddev, z_score, baseline_median, baseline_mad, band_low, band_high, started_at)
     VALUES ($1, $2, 'response_time', 'open', now(), date_trunc('hour', now()) - interval '1 hour',
       date_trunc('hour', now()), 950, 210, 20, 33.7, 200, 15, 120, 280, date_trunc('hour', now()) - interval '2 hours')`,
    [randomUUID(), connId],
  );
  await page.reload();
  const anomaly = page.locator("tr[data-anomaly]");
  t.equal(await anomaly.count(), 1);
  t.match(
    await anomaly.textContent(),
    /response time \(p95\)[\s\S]*950 ms[\s\S]*200 ms[\s\S]*band 120 ms – 280 ms[\s\S]*33\.7/,
  );
  await axe(t, page, "anomalies");

  // dark mode, and a phone's width
  const { page: dark } = await newPage(t, b, { colorScheme: "dark", viewport: { width: 390, height: 844 } });
  await signIn(dark, v.url, ALICE.email, ALICE.password);
  for (const path of ["/incidents", `/incidents/${incidentId}`, "/anomalies", "/alerts"]) {
    await dark.goto(`${v.url}${path}`);
    await axe(t, dark, `${path} (dark, 390 px)`);
    const overflow = await dark.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    t.ok(overflow <= 1, `${path} fits 390 px (tables scroll inside their frame)`);
  }

  // the platform recovers: two good checks resolve it; a stale form then gets the core's 409
  await fetch(`${sim.url}/__sim/state`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fault: "none" }),
  });
  await until(
    "the incident to resolve",
    async () => (await api(`/v1/incidents/${incidentId}`)).body.status === "resolved",
  );
  t.equal(await submit(stale2, "Acknowledge"), 409, "acknowledging a resolved incident: 409");
  t.match(
    await stale2.locator("#acknowledge-error").textContent(),
    `Incident ${incidentId} is already resolved; only an open incident can be acknowledged`,
  );
  t.equal(await stale2.locator("#incident-status").textContent(), "resolved");
  t.match(
    await stale2.locator('ol.timeline li[data-event="resolved"]').textContent(),
    /Resolved automatically/,
  );
  t.equal((await api(`/v1/incidents/${incidentId}`)).body.status, "resolved", "nothing changed");
  await page.goto(`${v.url}/incidents?status=resolved`);
  t.equal(await page.locator(`tr[data-incident="${incidentId}"] .badge`).textContent(), "resolved");
});
