/// <reference lib="dom" />
import type { Page } from "playwright-core";
import t from "tap";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { axe, browser, newPage, requireChromium, shot, signIn, vigil } from "./harness.js";

/**
 * Connections in a real browser against a real `vigil serve` (all roles: API, probes, jobs) and a
 * workflow_a simulator: a connection added through the form turns active on the list and its
 * uptime bar's today cell fills (today's cell comes from raw samples, so it fills at the first
 * check, before the 5-minute rollup job); bad input shows the API's message next to the field
 * and creates nothing; an edit that leaves the key empty keeps it (the next check still passes);
 * delete asks first; another tenant's id is a 404; a member cannot delete the organization's
 * connection (403); the connection page draws its chart without a CSP error; the list works at
 * 390 px; axe-clean in light and dark.
 */
t.setTimeout(240_000);

const OWNER = { email: "owner@conn.example", password: "owner password 1" };
const OTHER = { email: "other@conn.example", password: "other password 1" };
const MEMBER = { email: "member@conn.example", password: "member password 1" };

async function submit(page: Page, name: string | RegExp) {
  const [res] = await Promise.all([page.waitForNavigation(), page.getByRole("button", { name }).click()]);
  return res;
}

/** Reloads `url` until `ok` holds on the page, or fails after `ms`. */
async function until(page: Page, url: string, ok: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    await page.goto(url);
    if (await ok()) return true;
    if (Date.now() > end) return false;
    await page.waitForTimeout(1500);
  }
}

t.test("connections: add against the simulator, see it active with today's cell, edit, delete", async (t) => {
  if (!requireChromium(t)) return;
  const sim = await startWorkflowA({ executions: 3 });
  t.teardown(() => sim.close());
  const v = await vigil(t);
  const mk = (u: { email: string; password: string }) =>
    v.admin("create-user", "--email", u.email, "--password", u.password, "--plan", "enterprise");
  const owner = await mk(OWNER);
  await mk(OTHER);
  const member = await mk(MEMBER);
  const org = await v.admin(
    "create-org",
    "--name",
    "Acme Ops",
    "--owner",
    String(owner.id),
    "--plan",
    "enterprise",
  );
  await v.admin("add-member", "--org", String(org.id), "--user", String(member.id), "--role", "member");

  const b = await browser(t);
  const { page } = await newPage(t, b);
  await signIn(page, v.url, OWNER.email, OWNER.password);
  t.equal(new URL(page.url()).pathname, "/connections", "the dashboard's home is the connections list");
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Connections");
  t.match(await page.locator("#connections-empty").textContent(), /No connections yet/);
  await axe(t, page, "connections list, empty");

  await Promise.all([page.waitForNavigation(), page.getByRole("link", { name: "Add connection" }).click()]);
  t.equal(new URL(page.url()).pathname, "/connections/new");
  await axe(t, page, "add form");

  // bad input: the API's message next to the field, 400, nothing created
  await page.getByLabel("Name").fill("n8n production");
  await page.getByLabel("Base URL").fill("not a url");
  await page.getByLabel("API key").fill("sim-api-key");
  await page.getByLabel(/Check interval/).fill("10");
  const bad = await submit(page, "Add connection");
  t.equal(bad?.status(), 400, "a bad base_url is a 400");
  t.equal(await page.locator("#base_url-error").textContent(), "must be an http or https URL");
  t.equal(await page.getByLabel("Base URL").getAttribute("aria-invalid"), "true");
  t.match(await page.getByLabel("Base URL").getAttribute("aria-describedby"), /base_url-error/);
  t.equal(await page.getByLabel("Name").inputValue(), "n8n production", "values kept");
  t.equal(await page.getByLabel("API key").inputValue(), "", "the key is not sent back");
  await axe(t, page, "add form with an error");
  const tooShort = await (async () => {
    await page.getByLabel("Base URL").fill(sim.url);
    await page.getByLabel("API key").fill("sim-api-key");
    await page.getByLabel(/Check interval/).fill("5");
    return submit(page, "Add connection");
  })();
  t.equal(tooShort?.status(), 400);
  t.match(
    await page.locator("#check_interval_seconds-error").textContent(),
    /at least 10 on the enterprise plan/,
  );
  await page.goto(`${v.url}/connections`);
  t.equal(await page.locator("#connections-table tbody tr").count(), 0, "nothing was created");

  // the real one, against the simulator, checked every 10 s
  await page.goto(`${v.url}/connections/new`);
  await page.getByLabel("Name").fill("n8n production");
  await page.getByLabel("Base URL").fill(sim.url);
  await page.getByLabel("API key").fill("sim-api-key");
  await page.getByLabel(/Check interval/).fill("10");
  const made = await submit(page, "Add connection");
  t.equal(made?.status(), 200);
  const id = /\/connections\/([0-9a-f-]{36})/.exec(page.url())?.[1] ?? "";
  t.ok(id, "on the new connection's page");
  t.match(await page.locator(".notice").textContent(), /connection was created/);

  const row = page.locator(`tr[data-id="${id}"]`);
  const today = new Date().toISOString().slice(0, 10);
  const active = await until(
    page,
    `${v.url}/connections`,
    async () =>
      (await row.locator(".badge").first().textContent()) === "active" &&
      (await row.locator(".ub i").last().getAttribute("class")) === "o",
    90_000,
  );
  t.ok(active, "the connection turned active and today's cell filled");
  t.equal(await row.locator(".ub i").count(), 90, "90 cells");
  t.match(
    await row.locator(".ub i").last().getAttribute("title"),
    new RegExp(`^${today}: 100% \\(\\d+/\\d+\\)$`),
  );
  t.match(await row.locator(".ub").getAttribute("aria-label"), /^90-day uptime 100%$/);
  t.equal(await row.locator(".ub").getAttribute("role"), "img");
  t.match(await row.locator("td.num").textContent(), /\d+ ms/, "the last response time");
  t.equal(await row.locator("time").count(), 1, "the last check time");
  await axe(t, page, "connections list");
  await shot(page, "connections");

  // filters
  await page.getByLabel("Kind").selectOption("gateway");
  await Promise.all([page.waitForNavigation(), page.getByRole("button", { name: "Filter" }).click()]);
  t.match(page.url(), /service_type=gateway/);
  t.equal(await row.count(), 0, "filtered out");
  await page.getByLabel("Kind").selectOption("workflow_a");
  await page.getByLabel("Status").selectOption("active");
  await Promise.all([page.waitForNavigation(), page.getByRole("button", { name: "Filter" }).click()]);
  t.equal(await row.count(), 1, "kind and status match");

  // the connection page: a chart, drawn without a CSP error (newPage fails the test on one)
  await page.goto(`${v.url}/connections/${id}`);
  await page.waitForSelector("#rt-chart canvas", { timeout: 10_000 });
  t.equal(await page.locator("#rt-chart canvas").count(), 1, "uPlot drew a canvas");
  t.equal(await page.locator("#rt-data").count(), 1, "the data block stays");
  t.ok((await page.locator("#timeline-table tbody tr").count()) >= 1, "the data table is there");
  t.match(await page.locator("#uptime-value").textContent(), /^100%$/);
  for (const r of ["7d", "30d", "90d"]) {
    await page.getByRole("link", { name: r, exact: true }).click();
    await page.waitForSelector("#rt-chart canvas");
    t.equal(await page.locator(`.tabs a[aria-current="page"]`).textContent(), r, `range ${r}`);
  }
  await page.goto(`${v.url}/connections/${id}`);
  await page.waitForSelector("#rt-chart canvas");
  await axe(t, page, "connection page");

  // edit: the key is never shown; left empty it is kept (a new address is checked with it)
  await page.getByRole("link", { name: "Edit" }).click();
  await page.waitForURL(/\/edit$/);
  t.equal(await page.getByLabel("API key").inputValue(), "");
  t.equal(await page.getByLabel("API key").getAttribute("placeholder"), "•••• stored; type to replace");
  t.notMatch(await page.content(), /sim-api-key/);
  await axe(t, page, "edit form");
  await page.getByLabel("Name").fill("n8n prod (edited)");
  await page.getByLabel("Base URL").fill(`${sim.url}/`);
  const saved = await submit(page, "Save changes");
  t.equal(saved?.status(), 200);
  t.match(await page.locator(".notice").textContent(), /updated/);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "n8n prod (edited)");
  const stillWorks = await until(
    page,
    `${v.url}/connections/${id}`,
    async () => (await page.locator(".facts .badge").textContent()) === "active",
    60_000,
  );
  t.ok(stillWorks, "checked again with the stored key, it is active: the key was kept");
  await page.waitForSelector("#rt-chart canvas");
  await shot(page, "connection");

  // another tenant: 404, and the connection is not listed
  const other = await newPage(t, b);
  await signIn(other.page, v.url, OTHER.email, OTHER.password);
  const foreign = await other.page.goto(`${v.url}/connections/${id}`);
  t.equal(foreign?.status(), 404, "another tenant's connection is a 404");
  t.equal(await other.page.getByRole("heading", { level: 1 }).textContent(), "Not found");
  t.notMatch(await other.page.content(), /n8n prod/);
  t.equal((await other.page.goto(`${v.url}/connections/${id}/edit`))?.status(), 404);

  // an organization's connection: a member cannot delete it
  await page.goto(`${v.url}/connections/new?kind=workflow_a`);
  await page.getByLabel("Name").fill("shared n8n");
  await page.getByLabel("Base URL").fill(sim.url);
  await page.getByLabel("API key").fill("sim-api-key");
  await page.getByLabel("Organization").selectOption({ label: "Acme Ops" });
  await submit(page, "Add connection");
  const orgConn = /\/connections\/([0-9a-f-]{36})/.exec(page.url())?.[1] ?? "";
  t.match(await page.locator(".facts").textContent(), /Organization: Acme Ops/);
  const m = await newPage(t, b);
  await signIn(m.page, v.url, MEMBER.email, MEMBER.password);
  await m.page.goto(`${v.url}/connections/${orgConn}/edit`);
  m.page.once("dialog", (d) => void d.accept());
  const denied = await submit(m.page, "Delete connection");
  t.equal(denied?.status(), 403, "a member cannot delete the organization's connection");
  t.match(await m.page.locator("main").textContent(), /needs the admin or owner role/);
  await page.goto(`${v.url}/connections`);
  t.equal(await page.locator(`tr[data-id="${orgConn}"]`).count(), 1, "it is still there");

  // delete, after the confirmation (dismissed first: nothing happens)
  await page.goto(`${v.url}/connections/${id}/edit`);
  page.once("dialog", (d) => void d.dismiss());
  await page.getByRole("button", { name: "Delete connection" }).click();
  await page.waitForTimeout(300);
  t.match(page.url(), /\/edit$/, "dismissed: still on the edit page");
  page.once("dialog", (d) => {
    t.match(d.message(), /Delete n8n prod \(edited\)\?/);
    void d.accept();
  });
  await submit(page, "Delete connection");
  t.match(page.url(), /\/connections\?notice=deleted$/);
  t.equal(await page.locator(`tr[data-id="${id}"]`).count(), 0, "gone from the list");
  t.equal((await page.goto(`${v.url}/connections/${id}`))?.status(), 404);

  // a phone: the page body does not scroll sideways; the table scrolls in its wrapper
  const phone = await newPage(t, b, { viewport: { width: 390, height: 844 } });
  await signIn(phone.page, v.url, OWNER.email, OWNER.password);
  await phone.page.goto(`${v.url}/connections`);
  t.ok(
    await phone.page.evaluate(() => document.documentElement.scrollWidth <= 390),
    "no horizontal overflow of the page at 390 px",
  );
  t.equal(
    await phone.page.evaluate(
      () => getComputedStyle(document.querySelector(".table-wrap") as Element).overflowX,
    ),
    "auto",
  );
  await phone.page.goto(`${v.url}/connections/${orgConn}`);
  await phone.page.waitForSelector("#rt-chart canvas");
  const wide = await phone.page.evaluate(() =>
    Array.from(document.querySelectorAll("main *"))
      .filter((e) => e.getBoundingClientRect().right > 390 && !e.closest(".table-wrap"))
      .map((e) => `${e.tagName}.${e.className}`)
      .slice(0, 5),
  );
  t.same(wide, [], "nothing sticks out of the connection page at 390 px (tables scroll in their wrapper)");
  t.ok(
    await phone.page.evaluate(() => document.documentElement.scrollWidth <= 390),
    "nor does the connection page scroll sideways",
  );

  // dark mode
  const dark = await newPage(t, b, { colorScheme: "dark" });
  await signIn(dark.page, v.url, OWNER.email, OWNER.password);
  await dark.page.goto(`${v.url}/connections`);
  await axe(t, dark.page, "connections list, dark");
  await dark.page.goto(`${v.url}/connections/new`);
  await axe(t, dark.page, "add form, dark");
  await dark.page.goto(`${v.url}/connections/${orgConn}`);
  await dark.page.waitForSelector("#rt-chart canvas");
  await axe(t, dark.page, "connection page, dark");
});
