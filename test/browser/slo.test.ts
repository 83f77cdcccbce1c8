/// <reference lib="dom" />
import type { Page } from "playwright-core";
import t from "tap";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { createSqlSeriesStore } from "../../src/stores/series/sql.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { axe, browser, newPage, requireChromium, shot, signIn, vigil } from "./harness.js";

/**
 * A connection's SLO panel in a real browser against a real `vigil serve` (API role only, on
 * PostgreSQL, so the test writes the samples itself through the series store and no probe adds
 * any while it reads): with an SLO, the error budget remaining on the page is what
 * GET /v1/connections/{id}/slo answers, marked overspent below 0, and the burn-down chart has one
 * point per UTC day of the window, ending at that figure; without one, the page says so and how to
 * set one. The form sets an SLO (a percentage typed as the objective is the API's 400, next to the
 * field, nothing stored) and removes it, as PUT and DELETE do. Axe-clean in light and dark.
 */
t.setTimeout(240_000);

const OWNER = { email: "owner@slo.example", password: "owner password 1" };
const DAY = 86_400_000;
const MIN = 60_000;

async function submit(page: Page, name: string | RegExp) {
  const [res] = await Promise.all([page.waitForNavigation(), page.getByRole("button", { name }).click()]);
  return res?.status();
}

t.test(
  "the SLO panel: budget, burn rates and burn-down; none; set and remove through the form",
  async (t) => {
    if (!requireChromium(t)) return;
    if (!(await requireBackend(t, "postgres"))) return;
    const databaseUrl = await freshDatabaseUrl(t);
    const v = await vigil(t, { DATABASE_URL: databaseUrl }, ["--roles", "api"]);
    const owner = await v.admin(
      "create-user",
      "--email",
      OWNER.email,
      "--password",
      OWNER.password,
      "--plan",
      "enterprise",
    );
    const key = String((await v.admin("create-key", "--user", String(owner.id), "--name", "slo test")).key);
    const api = async (path: string, init: RequestInit = {}) => {
      const r = await fetch(`${v.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    const connection = async (name: string) => {
      const r = await api("/v1/connections", {
        method: "POST",
        body: JSON.stringify({ service_type: "gateway", service_name: name }),
      });
      t.equal(r.status, 201, `${name} is created`);
      return (r.body.connection as { id: string }).id;
    };
    const withSlo = await connection("payments gateway <main>");
    const without = await connection("search gateway");

    // four days of a check every 10 minutes, some failed (and one under maintenance, left out)
    const now = Date.now();
    const db = createPgStore({ connectionString: databaseUrl, max: 2 });
    t.teardown(() => db.close());
    const series = createSqlSeriesStore(db);
    const rows = [];
    for (let at = now - 4 * DAY; at < now - MIN; at += 10 * MIN) {
      const k = Math.floor((now - at) / (10 * MIN));
      rows.push({ at, ok: k % 50 !== 7, maintenance: false });
    }
    rows.push({ at: now - 2 * MIN, ok: false, maintenance: true });
    await series.append(
      availabilitySamples,
      rows.map((s) => ({
        ts: new Date(s.at),
        connection_id: withSlo,
        available: s.ok,
        response_time_ms: s.ok ? 120 : null,
        status_code: s.ok ? 200 : 503,
        reason: s.ok ? null : "http_status",
        error: null,
        synthetic: false,
        source: "probe",
        maintenance: s.maintenance,
      })),
    );
    await series.waitVisible();
    const put = await api(`/v1/connections/${withSlo}/slo`, {
      method: "PUT",
      body: JSON.stringify({ objective: 0.999, window_days: 30 }),
    });
    t.equal(put.status, 200, "the SLO is set through the API");

    const b = await browser(t);
    const { page } = await newPage(t, b);
    await signIn(page, v.url, OWNER.email, OWNER.password);

    // with an SLO: the page's figures are GET's
    const shown = await page.goto(`${v.url}/connections/${withSlo}`);
    t.equal(shown?.status(), 200);
    const slo = (await api(`/v1/connections/${withSlo}/slo`)).body as {
      window_start: string;
      error_budget: { remaining: number };
      sli: { availability: number; failed: number };
      burn_rates: Record<string, number | null>;
    };
    const remaining = slo.error_budget.remaining;
    t.ok(slo.sli.failed > 0 && remaining < 0, "failures overspend a 99.9 % budget");
    const panel = page.locator('section[aria-labelledby="slo-h"]');
    t.equal(await panel.getByRole("heading", { level: 2 }).textContent(), "Service level objective");
    t.match(await page.locator("#slo-objective").textContent(), /99\.9%[\s\S]*30 UTC days/);
    t.equal(
      Number(await page.locator("#slo-remaining").getAttribute("data-remaining")),
      remaining,
      "the budget remaining is GET's error_budget.remaining",
    );
    t.equal(
      await page.locator("#slo-remaining").textContent(),
      `${Number((remaining * 100).toFixed(2))}%`,
      "shown as a percentage",
    );
    t.match(await page.locator("#slo-overspent").textContent(), /overspent/, "marked below 0");
    t.equal(
      await page.locator("#slo-sli").textContent(),
      `${Number((slo.sli.availability * 100).toFixed(4))}%`,
      "the SLI's availability",
    );
    for (const [w, rate] of Object.entries(slo.burn_rates))
      t.equal(
        await page.locator(`#slo-burn-rates td[data-window="${w}"]`).textContent(),
        rate === null ? "no checks" : String(Number(rate.toFixed(2))),
        `the ${w} burn rate`,
      );

    // the burn-down: one point per UTC day of the window, window_start to today, ending at GET's figure
    const points = page.locator("svg.burndown circle");
    t.equal(await points.count(), 30, "one point per day of the 30-day window");
    const days = await points.evaluateAll((cs) => cs.map((c) => c.getAttribute("data-day")));
    const want = Array.from({ length: 30 }, (_, i) =>
      new Date(Date.parse(slo.window_start) + i * DAY).toISOString().slice(0, 10),
    );
    t.same(days, want, "window_start … today, oldest first");
    t.equal(
      Number(await points.last().getAttribute("data-remaining")),
      remaining,
      "the last point is the figure",
    );
    t.equal(
      await points.first().getAttribute("data-remaining"),
      "1",
      "nothing spent before the first failure",
    );
    t.equal(await page.locator("svg.burndown").getAttribute("role"), "img");
    t.match(await page.locator("#slo-chart-caption").textContent(), /30 days/);
    t.equal(await page.locator("#slo-burndown-table tbody tr").count(), 5, "the table: the days with checks");
    t.match(await page.locator("h1").textContent(), "payments gateway <main>", "the name is text, escaped");
    await axe(t, page, "connection page with an SLO");
    await page.evaluate(() => document.getElementById("slo-h")?.scrollIntoView());
    await shot(page, "connection-slo");

    // without an SLO: a line saying so and how to set one
    await page.goto(`${v.url}/connections/${without}`);
    t.match(
      await page.locator("#slo-none").textContent(),
      new RegExp(`No service level objective[\\s\\S]*PUT /v1/connections/${without}/slo`),
    );
    t.equal(await page.locator("svg.burndown").count(), 0, "no chart");
    await axe(t, page, "connection page without an SLO");

    // the form: a percentage is the API's 400 next to the field, nothing stored
    await page.getByLabel("Objective", { exact: true }).fill("99.9");
    t.equal(await submit(page, "Set SLO"), 400);
    t.equal(
      await page.locator("#slo-objective-input-error").textContent(),
      "must be a fraction, not a percentage: 99.9 % is 0.999",
    );
    t.equal(await page.getByLabel("Objective", { exact: true }).getAttribute("aria-invalid"), "true");
    t.equal(await page.getByLabel("Objective", { exact: true }).inputValue(), "99.9", "the value is kept");
    await axe(t, page, "SLO form with an error");
    t.equal((await api(`/v1/connections/${without}/slo`)).body.objective, null, "nothing stored");

    // set: 99.5 % over 28 days, as PUT would
    await page.getByLabel("Objective", { exact: true }).fill("0.995");
    await page.getByLabel("Window", { exact: true }).selectOption("28");
    t.equal(await submit(page, "Set SLO"), 200);
    t.match(await page.locator(".notice").textContent(), /service level objective was saved/);
    const set = (await api(`/v1/connections/${without}/slo`)).body as {
      objective: number;
      window_days: number;
      error_budget: { remaining: number };
    };
    t.same([set.objective, set.window_days], [0.995, 28], "GET answers what the form set");
    t.equal(set.error_budget.remaining, 1, "no checks: nothing consumed");
    t.equal(await page.locator("#slo-remaining").textContent(), "100%");
    t.equal(await page.locator("svg.burndown circle").count(), 28, "28 points");
    t.equal(await page.locator("#slo-sli").textContent(), "no checks yet");
    t.equal(
      await page.getByLabel("Objective", { exact: true }).inputValue(),
      "0.995",
      "the form shows the SLO",
    );

    // remove
    t.equal(await submit(page, "Remove SLO"), 200);
    t.match(await page.locator(".notice").textContent(), /service level objective was removed/);
    t.equal(await page.locator("#slo-none").count(), 1);
    t.equal((await api(`/v1/connections/${without}/slo`)).body.objective, null, "GET: none");

    // dark mode and a phone's width
    const { page: dark } = await newPage(t, b, {
      colorScheme: "dark",
      viewport: { width: 390, height: 844 },
    });
    await signIn(dark, v.url, OWNER.email, OWNER.password);
    await dark.goto(`${v.url}/connections/${withSlo}`);
    await axe(t, dark, "connection page with an SLO (dark, 390 px)");
    const overflow = await dark.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    t.ok(overflow <= 1, "fits 390 px");
  },
);
