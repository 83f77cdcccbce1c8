import type { Page } from "playwright-core";
import t from "tap";
import { formatUsd, parseSpendRange } from "../../src/usage/account-spend.js";
import { axe, browser, newPage, requireChromium, shot, signIn, vigil } from "./harness.js";

/**
 * Usage and cost in a real browser against a real `vigil serve`: usage recorded through the REST
 * API (entries today, a gateway heartbeat two days ago) shows on the page with totals equal to
 * PUT /v1/usage for the same connections and days; bad ranges are a 400 with the message next to
 * the field; another tenant's connection or organization is refused.
 */

t.test("ranges and money (the core's parsing)", async (t) => {
  const now = new Date("2026-11-24T15:00:00Z");
  t.same(
    (({ from, to, days }) => ({ from, to, days }))(parseSpendRange({}, now)),
    { from: "2026-10-26", to: "2026-11-24", days: 30 },
    "30 days up to today by default",
  );
  const week = parseSpendRange({ days: "7" }, now);
  t.same(
    [week.from, week.to, week.start.toISOString(), week.end.toISOString()],
    ["2026-11-18", "2026-11-24", "2026-11-18T00:00:00.000Z", "2026-11-24T23:59:59.999Z"],
  );
  t.equal(parseSpendRange({ from: "2025-10-21", to: "2026-11-24" }, now).days, 400, "400 days is allowed");
  const bad: [Record<string, string>, RegExp][] = [
    [{ from: "2026-11-10", to: "2026-11-01" }, /from: must not be after to/],
    [{ from: "2025-10-20", to: "2026-11-24" }, /to: the range is at most 400 days; this one is 401 days/],
    [{ from: "2026-02-30" }, /from: "2026-02-30" is not a date/],
    [{ to: "yesterday" }, /to: "yesterday" is not a date/],
    [{ days: "0" }, /days: must be a whole number of days from 1 to 400/],
    [{ days: "401" }, /days:/],
  ];
  for (const [q, message] of bad) t.throws(() => parseSpendRange(q, now), { message }, JSON.stringify(q));
  t.equal(formatUsd(123.4), "$1.23");
  t.equal(formatUsd(0), "$0.00");
  t.equal(formatUsd(123456789.5), "$1,234,567.90");
  t.equal(formatUsd(-5), "-$0.05");
});

const OWNER = { email: "owner@usage.example", password: "owner password 1" };

interface Totals {
  entries: number;
  heartbeats: number;
  tokens: number;
  cost_cents: number;
}

/** The totals as the page shows them. */
async function pageTotals(page: Page): Promise<Totals & { cost: string }> {
  const n = async (id: string) => Number(((await page.locator(id).textContent()) ?? "").replace(/,/g, ""));
  return {
    entries: await n("#total-entries"),
    heartbeats: await n("#total-heartbeats"),
    tokens: await n("#total-tokens"),
    cost_cents: Number(await page.locator("#total-cost").getAttribute("data-cents")),
    cost: ((await page.locator("#total-cost").textContent()) ?? "").trim(),
  };
}

t.test("the usage page: totals equal PUT /v1/usage; filters; bad ranges", async (t) => {
  if (!requireChromium(t)) return;
  const v = await vigil(t);
  const owner = await v.admin(
    "create-user",
    "--email",
    OWNER.email,
    "--password",
    OWNER.password,
    "--plan",
    "enterprise",
  );
  const org = await v.admin(
    "create-org",
    "--name",
    "Acme Ops",
    "--owner",
    String(owner.id),
    "--plan",
    "enterprise",
  );
  const key = String((await v.admin("create-key", "--user", String(owner.id)))["key"]);
  const stranger = await v.admin("create-user", "--email", "stranger@usage.example", "--plan", "enterprise");
  const strangerOrg = await v.admin("create-org", "--name", "Theirs", "--owner", String(stranger.id));
  const strangerKey = String((await v.admin("create-key", "--user", String(stranger.id)))["key"]);

  const call = async (k: string, method: string, path: string, body?: unknown) => {
    const r = await fetch(`${v.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${k}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const gateway = async (k: string, name: string, organization_id?: string) => {
    const r = (await call(k, "POST", "/v1/connections", {
      service_type: "gateway",
      service_name: name,
      ...(organization_id ? { organization_id } : {}),
    })) as { connection: { id: string }; ingest_api_key: string };
    return { id: r.connection.id, ingest: r.ingest_api_key };
  };
  const mine = await gateway(key, "edge gateway");
  const ours = await gateway(key, "acme gateway", String(org.id));
  const theirs = await gateway(strangerKey, "their gateway");

  await call(key, "POST", "/v1/usage", [
    { connection_id: mine.id, entity: "gpt-4o", usage_amount: 1200, cost_cents: 12.5 },
    { connection_id: mine.id, entity: "claude-haiku", usage_amount: 800, cost_cents: 7.25 },
    {
      connection_id: mine.id,
      entity: "images",
      usage_entity: "custom",
      custom_name: "images",
      usage_amount: 3,
      cost_cents: 40,
    },
    { connection_id: ours.id, entity: "gpt-4o", usage_amount: 500, cost_cents: 3.333 },
  ]);
  await call(strangerKey, "POST", "/v1/usage", [
    { connection_id: theirs.id, entity: "gpt-4o", usage_amount: 999999, cost_cents: 99999 },
  ]);
  // a heartbeat whose period ended two days ago counts on that day
  const ended = new Date(Date.now() - 2 * 86_400_000);
  const hb = await fetch(`${v.url}/v1/gateway/ingest`, {
    method: "POST",
    headers: { authorization: `Bearer ${mine.ingest}`, "content-type": "application/json" },
    body: JSON.stringify({
      type: "heartbeat",
      gateway: { status: "healthy", latencyMs: 12, version: "1.0.0" },
      tokens: {
        period: {
          inputTokens: 10000,
          outputTokens: 2000,
          requestCount: 4,
          estimatedCostUsd: 0.42,
          startedAt: new Date(ended.getTime() - 300_000).toISOString(),
          endedAt: ended.toISOString(),
        },
        byModel: [
          { model: "claude-sonnet-4-5", inputTokens: 10000, outputTokens: 2000, estimatedCostUsd: 0.42 },
        ],
      },
    }),
  });
  t.equal(hb.status, 201, await hb.text());

  const apiTotals = async (connectionId: string, from: string, to: string) =>
    (
      (await call(
        key,
        "PUT",
        `/v1/usage?connection_id=${connectionId}&start_date=${from}T00:00:00.000Z&end_date=${to}T23:59:59.999Z`,
      )) as { totals: Totals }
    ).totals;
  const sum = (a: Totals[]) => ({
    entries: a.reduce((s, x) => s + x.entries, 0),
    heartbeats: a.reduce((s, x) => s + x.heartbeats, 0),
    tokens: a.reduce((s, x) => s + x.tokens, 0),
    cost_cents: Math.round(a.reduce((s, x) => s + x.cost_cents, 0) * 1e6) / 1e6,
  });

  const b = await browser(t);
  const { page } = await newPage(t, b);
  await signIn(page, v.url, OWNER.email, OWNER.password);

  // everything visible, last 7 days
  const res = await page.goto(`${v.url}/usage`);
  t.equal(res?.status(), 200);
  await Promise.all([page.waitForURL(/days=7/), page.getByRole("link", { name: "Last 7 days" }).click()]);
  const from = await page.getByLabel("From", { exact: true }).inputValue();
  const to = await page.getByLabel("To", { exact: true }).inputValue();
  t.equal(to, new Date().toISOString().slice(0, 10), "up to today (UTC)");
  const all = await pageTotals(page);
  const api = sum([await apiTotals(mine.id, from, to), await apiTotals(ours.id, from, to)]);
  t.same(
    { entries: all.entries, heartbeats: all.heartbeats, tokens: all.tokens, cost_cents: all.cost_cents },
    api,
    "the page's totals equal PUT /v1/usage over the visible connections",
  );
  t.same(api, { entries: 4, heartbeats: 1, tokens: 1200 + 800 + 500 + 12000, cost_cents: 105.083 });
  t.equal(all.cost, formatUsd(api.cost_cents), "money in dollars with cents");
  t.equal(all.cost, "$1.05");
  t.notMatch(
    await page.locator("main").textContent(),
    /their gateway/,
    "another tenant's usage is not counted",
  );
  const day = (d: Date) =>
    page.locator("table[aria-labelledby=by-day] tr", { hasText: d.toISOString().slice(0, 10) });
  t.match(await day(new Date()).textContent(), /\$0\.63/, "today's entries");
  t.match(await day(ended).textContent(), /12,000.*\$0\.42/, "the heartbeat's day");
  t.equal(await page.locator(".spend-chart rect.bar").count(), 7, "one bar a day");
  t.match(await page.locator("table[aria-labelledby=by-model]").textContent(), /claude-sonnet-4-5/);
  t.match(await page.locator("table[aria-labelledby=by-model]").textContent(), /gpt-4o/);
  await axe(t, page, "usage page");
  await shot(page, "usage");

  // one connection, through the form: exactly PUT /v1/usage
  await page.getByLabel("Connection", { exact: true }).selectOption({ label: "edge gateway (gateway)" });
  await Promise.all([page.waitForURL(/connection=/), page.getByRole("button", { name: "Show" }).click()]);
  const one = await pageTotals(page);
  const oneApi = await apiTotals(mine.id, from, to);
  t.same(
    { entries: one.entries, heartbeats: one.heartbeats, tokens: one.tokens, cost_cents: one.cost_cents },
    {
      entries: oneApi.entries,
      heartbeats: oneApi.heartbeats,
      tokens: oneApi.tokens,
      cost_cents: oneApi.cost_cents,
    },
    "one connection: the page equals PUT /v1/usage",
  );
  t.match(await page.locator("main").textContent(), `PUT /v1/usage?connection_id=${mine.id}`);

  // one organization
  await page.getByLabel("Connection", { exact: true }).selectOption({ label: "All connections" });
  await page.getByLabel("Account", { exact: true }).selectOption({ label: "Organization: Acme Ops" });
  await Promise.all([page.waitForURL(/account=/), page.getByRole("button", { name: "Show" }).click()]);
  const orgTotals = await pageTotals(page);
  t.equal(orgTotals.cost_cents, (await apiTotals(ours.id, from, to)).cost_cents, "the organization's spend");
  t.equal(orgTotals.entries, 1);

  // bad ranges: 400, the message next to the field, no report
  for (const [query, field, message] of [
    ["from=2026-11-10&to=2026-11-01", "from", /must not be after to/],
    ["from=2024-01-01&to=2026-01-01", "to", /at most 400 days/],
    ["from=2026-13-45&to=2026-11-01", "from", /is not a date/],
    ["days=9999", "from", /whole number of days/],
  ] as const) {
    const r = await page.goto(`${v.url}/usage?${query}`);
    t.equal(r?.status(), 400, query);
    t.match(await page.locator(`#usage-${field}-error`).textContent(), message, `${query}: the message`);
    t.equal(await page.locator(`#usage-${field}`).getAttribute("aria-invalid"), "true");
    t.equal(await page.locator("#total-cost").count(), 0, "no figures for a bad range");
  }
  await axe(t, page, "usage page with a bad range");
  // the same through the form
  await page.goto(`${v.url}/usage`);
  await page.getByLabel("From", { exact: true }).fill("2026-11-20");
  await page.getByLabel("To", { exact: true }).fill("2026-11-02");
  const viaForm = await Promise.all([
    page.waitForNavigation(),
    page.getByRole("button", { name: "Show" }).click(),
  ]).then(([r]) => r);
  t.equal(viaForm?.status(), 400);
  t.match(await page.locator("#usage-from-error").textContent(), /must not be after to/);

  // another tenant's connection or organization
  const other = await page.goto(`${v.url}/usage?connection=${theirs.id}`);
  t.equal(other?.status(), 403, "another tenant's connection: refused as PUT /v1/usage refuses it");
  t.notMatch(await page.content(), /999,999|\$999/);
  const otherOrg = await page.goto(`${v.url}/usage?account=${String(strangerOrg.id)}`);
  t.equal(otherOrg?.status(), 404, "another tenant's organization: not found");

  // dark mode and a phone
  const { page: dark } = await newPage(t, b, { colorScheme: "dark", viewport: { width: 390, height: 800 } });
  await signIn(dark, v.url, OWNER.email, OWNER.password);
  await dark.goto(`${v.url}/usage?days=30`);
  await axe(t, dark, "usage page (dark, phone)");
  const overflow = await dark.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  t.ok(overflow <= 1, "no sideways scroll of the page at 390 px");
});
