/// <reference lib="dom" />
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import t, { type Test } from "tap";
import { packageRoot } from "../../src/lib/paths.js";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { createSqlSeriesStore } from "../../src/stores/series/sql.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { axe, browser, newPage, requireChromium, signIn, vigil } from "./harness.js";

/**
 * Status pages in a real browser against a real `vigil serve` (API role only, on PostgreSQL, so
 * the test writes 90 days of checks itself through the series store and no probe adds any): a
 * page is created through the dashboard's form (a reserved slug and a row without a public name
 * are the API's messages next to their fields, nothing stored), listed, edited; an incident post
 * and an update written in the dashboard show on the public page /status/{slug}, opened without
 * a session. The public page is axe-clean in light and dark at 390 px with no sideways scroll,
 * works with JavaScript off (the bars and components are there), never shows a connection's own
 * name, and shows a title with <script> as text; a post is removed and a page deleted after the
 * confirmation; the dashboard's pages are axe-clean too. A logo is uploaded through the settings
 * form (multipart) and served to visitors byte for byte; a text file named .png, a file over
 * 256 KiB and the form without its CSRF token are refused and change nothing. The docs'
 * screenshots of the public page (docs/images/status-page-{light,dark,phone}.png) are taken here,
 * from the same data.
 */
t.setTimeout(300_000);

const OWNER = { email: "owner@status.example", password: "owner password 1" };
const DAY = 86_400_000;
const MIN = 60_000;
const SLUG = "acme-cloud";
const INTERNAL_TITLE = "internal-hook-worker-pool-3: 503 from 10.0.3.17";
/** A 1×1 PNG, the logo uploaded through the forms. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);

/**
 * The connections: their own (internal) names, what visitors read instead, their response time,
 * the failed checks of some days (by days back, 0 being today: 1 of 144 is an amber day, more a
 * red one), and for one the first day it was checked (a component added later).
 */
interface Seeded {
  internal: string;
  group: string;
  name: string;
  rt: number;
  failures: Record<number, number>;
  from?: number;
}
const COMPONENTS: Seeded[] = [
  {
    internal: "internal-api-gw-eu-west-1",
    group: "Core",
    name: "API",
    rt: 142,
    failures: { 12: 1, 40: 6, 41: 1 },
  },
  { internal: "internal-web-frontend-blue", group: "Core", name: "Dashboard", rt: 210, failures: { 63: 1 } },
  {
    internal: "internal-hook-worker-pool-3",
    group: "Integrations",
    name: "Webhooks",
    rt: 380,
    failures: { 0: 4, 20: 1, 21: 9 },
  },
  {
    internal: "internal-eu-db-proxy",
    group: "Integrations",
    name: "EU data region",
    rt: 95,
    failures: { 33: 1 },
    from: 74,
  },
  { internal: "internal-stripe-relay", group: "Integrations", name: "Payments", rt: 260, failures: { 5: 1 } },
];

async function submit(page: Page, name: string | RegExp) {
  const [res] = await Promise.all([
    page.waitForNavigation(),
    page.getByRole("button", { name, exact: true }).click(),
  ]);
  return res;
}

/** A screenshot for the docs, into docs/images/NAME.png. */
async function docShot(page: Page, name: string, fullPage: boolean) {
  const dir = path.join(packageRoot, "docs", "images");
  fs.mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage });
}

/** The public page in a context of its own (no session cookie), optionally without JavaScript. */
async function visitor(
  t: Test,
  b: Browser,
  url: string,
  opts: { width?: number; height?: number; colorScheme?: "light" | "dark"; javaScript?: boolean } = {},
) {
  if (opts.javaScript === false) {
    const context = await b.newContext({
      javaScriptEnabled: false,
      viewport: { width: opts.width ?? 1280, height: opts.height ?? 860 },
    });
    t.teardown(() => context.close().catch(() => {}));
    const page = await context.newPage();
    const res = await page.goto(url);
    return { page, res, cookies: await context.cookies() };
  }
  const { page, context } = await newPage(t, b, {
    viewport: { width: opts.width ?? 1280, height: opts.height ?? 860 },
    colorScheme: opts.colorScheme ?? "light",
  });
  const res = await page.goto(url);
  return { page, res, cookies: await context.cookies() };
}

t.test("status pages: create in the dashboard, write posts, read the public page", async (t) => {
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
  const key = String((await v.admin("create-key", "--user", String(owner.id), "--name", "status")).key);
  const api = async (p: string, init: RequestInit = {}) => {
    const r = await fetch(`${v.url}${p}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

  // the connections, and 90 days of a check every 10 minutes (some failed: amber and red days)
  const ids: string[] = [];
  for (const c of COMPONENTS) {
    const r = await api("/v1/connections", {
      method: "POST",
      body: JSON.stringify({ service_type: "gateway", service_name: c.internal }),
    });
    t.equal(r.status, 201, `${c.internal} is created`);
    ids.push((r.body.connection as { id: string }).id);
  }
  const db = createPgStore({ connectionString: databaseUrl, max: 2 });
  t.teardown(() => db.close());
  const series = createSqlSeriesStore(db);
  const now = Date.now();
  const today = Math.floor(now / DAY) * DAY;
  for (const [n, c] of COMPONENTS.entries()) {
    const rows = [];
    for (let back = c.from ?? 89; back >= 0; back--) {
      const start = today - back * DAY;
      const fails = c.failures[back] ?? 0;
      for (let k = 0, at = start; at < Math.min(start + DAY, now - MIN); k++, at += 10 * MIN) {
        // today's failures are the latest checks (an outage going on); other days' mid-day
        const failed =
          back === 0 ? fails > 0 && at >= now - (fails + 1) * 10 * MIN : k >= 70 && k < 70 + fails;
        const ok = !failed;
        rows.push({
          ts: new Date(at),
          connection_id: ids[n] as string,
          available: ok,
          response_time_ms: ok ? c.rt + ((k * 37) % 40) : null,
          status_code: ok ? 200 : 503,
          reason: ok ? null : "http_status",
          error: null,
          synthetic: false,
          source: "probe",
          maintenance: false,
        });
      }
    }
    for (let i = 0; i < rows.length; i += 2000)
      await series.append(availabilitySamples, rows.slice(i, i + 2000));
  }
  await series.waitVisible();
  // their states, as the probes would have left them: all checked, the webhooks failing
  await db.query("UPDATE connections SET status = 'active' WHERE id = ANY($1::text[])", [ids]);
  await db.query("UPDATE connections SET status = 'error' WHERE id = $1", [ids[2]]);
  // and their incidents: the webhooks' going on, two resolved ones on their red days (times only
  // reach a visitor, never the internal title)
  const incident = async (n: number, openedAt: number, resolvedAt: number | null) =>
    db.query(
      `INSERT INTO incidents (id, connection_id, kind, status, title, opened_at, resolved_at)
       VALUES ($1, $2, 'availability', $3, $4, $5, $6)`,
      [
        randomUUID(),
        ids[n],
        resolvedAt === null ? "open" : "resolved",
        INTERNAL_TITLE,
        new Date(openedAt),
        resolvedAt === null ? null : new Date(resolvedAt),
      ],
    );
  await incident(2, now - 5 * 10 * MIN, null);
  await incident(2, today - 21 * DAY + 700 * MIN, today - 21 * DAY + 790 * MIN);
  await incident(0, today - 40 * DAY + 700 * MIN, today - 40 * DAY + 760 * MIN);

  const b = await browser(t);
  const { page } = await newPage(t, b);
  await signIn(page, v.url, OWNER.email, OWNER.password);

  // the list, from the navigation: none yet
  await page.goto(`${v.url}/connections`);
  await Promise.all([
    page.waitForURL(/\/status-pages$/),
    page.getByRole("link", { name: "Status pages", exact: true }).click(),
  ]);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Status pages");
  t.equal(
    await page.getByRole("link", { name: "Status pages", exact: true }).getAttribute("aria-current"),
    "page",
  );
  t.match(await page.locator("#pages-empty").textContent(), /No status page yet/);
  t.equal(await page.locator(".rows-table tbody tr").count(), 5, "five empty component rows");
  await axe(t, page, "status pages, none yet");

  // a reserved slug: the API's message next to the field, the values kept, nothing stored
  const fillRow = async (i: number, group: string, connection: string, name: string) => {
    await page.getByLabel(`Group, row ${i + 1}`, { exact: true }).fill(group);
    await page.getByLabel(`Connection, row ${i + 1}`, { exact: true }).selectOption({ label: connection });
    await page.getByLabel(`Public name, row ${i + 1}`, { exact: true }).fill(name);
  };
  await page.getByLabel("Slug", { exact: true }).fill("api");
  await page.getByLabel("Title", { exact: true }).fill("Acme Cloud");
  await page
    .getByLabel("Description (optional)")
    .fill("Live status of Acme Cloud's API, dashboard and integrations.");
  await page.getByLabel("Show response times").check();
  for (const [i, c] of COMPONENTS.entries()) await fillRow(i, c.group, c.internal, c.name);
  let res = await submit(page, "Create page");
  t.equal(res?.status(), 400, "a reserved slug is a 400");
  t.match(await page.locator("#sp-slug-error").textContent(), /reserved/);
  t.equal(await page.getByLabel("Slug", { exact: true }).getAttribute("aria-invalid"), "true");
  t.match(await page.getByLabel("Slug", { exact: true }).getAttribute("aria-describedby"), /sp-slug-error/);
  t.equal(await page.getByLabel("Title", { exact: true }).inputValue(), "Acme Cloud", "values are kept");
  t.equal(await page.getByLabel("Public name, row 3", { exact: true }).inputValue(), "Webhooks");
  t.equal(await page.getByLabel("Connection, row 3", { exact: true }).inputValue(), ids[2]);
  t.equal(await page.getByLabel("Show response times").isChecked(), true);
  t.match(await page.locator("#pages-empty").textContent(), /No status page yet/, "nothing stored");
  await axe(t, page, "create form with an error");

  // a row without a public name: the message at that row's field
  await page.getByLabel("Slug", { exact: true }).fill(SLUG);
  await page.getByLabel("Public name, row 4", { exact: true }).fill("");
  res = await submit(page, "Create page");
  t.equal(res?.status(), 400);
  t.match(await page.locator("#row-3-display-error").textContent(), /must not be empty/);
  t.equal(await page.getByLabel("Public name, row 4", { exact: true }).getAttribute("aria-invalid"), "true");
  t.same((await api("/v1/status-pages")).body.status_pages, [], "nothing stored");

  // created
  await page.getByLabel("Public name, row 4", { exact: true }).fill(COMPONENTS[3]?.name ?? "");
  res = await submit(page, "Create page");
  t.equal(res?.status(), 200);
  t.match(page.url(), /\/status-pages\/[0-9a-f-]{36}\?notice=created$/);
  t.match(await page.locator(".notice").textContent(), /status page was created/);
  const pageId = /status-pages\/([0-9a-f-]{36})/.exec(page.url())?.[1] ?? "";
  const stored = (await api(`/v1/status-pages/${pageId}`)).body as {
    slug: string;
    show_response_times: boolean;
    groups: { name: string; components: { connection_id: string; display_name: string }[] }[];
  };
  t.equal(stored.slug, SLUG);
  t.equal(stored.show_response_times, true);
  t.same(
    stored.groups.map((g) => [g.name, g.components.map((c) => c.display_name)]),
    [
      ["Core", ["API", "Dashboard"]],
      ["Integrations", ["Webhooks", "EU data region", "Payments"]],
    ],
    "GET answers the groups the rows made, in order",
  );

  // listed
  await page.getByRole("link", { name: "← Status pages" }).click();
  await page.waitForURL(/\/status-pages$/);
  const row = page.locator("#pages-table tbody tr");
  t.equal(await row.count(), 1);
  t.equal(await row.locator("td").nth(0).textContent(), "Acme Cloud");
  t.equal(await row.locator("a.public-link").getAttribute("href"), `${v.url}/status/${SLUG}`);
  t.equal(await row.locator("td").nth(3).textContent(), "5", "five components");
  t.equal(await row.locator("td").nth(4).textContent(), "0", "no active post");
  await axe(t, page, "status pages listed");

  // a post and an update, written in the dashboard
  await page.getByRole("link", { name: "Posts of Acme Cloud" }).click();
  await page.waitForURL(new RegExp(`/status-pages/${pageId}$`));
  t.match(await page.locator("#open-h-empty").textContent(), /No open post/);
  await page.getByLabel("Title", { exact: true }).fill("Webhook deliveries delayed");
  await page.getByLabel("Status", { exact: true }).selectOption("investigating");
  await page
    .getByLabel("Message", { exact: true })
    .fill("Some webhook deliveries are delayed by up to 20 minutes. We are investigating.");
  res = await submit(page, "Publish post");
  t.equal(res?.status(), 200);
  t.match(await page.locator(".notice").textContent(), /incident post is published/);
  const post = page.locator("article.post", { hasText: "Webhook deliveries delayed" });
  t.match(await post.locator(".badge").textContent(), /Investigating/);
  // an empty update: the API's message at its field, nothing added
  res = await Promise.all([
    page.waitForNavigation(),
    post.getByRole("button", { name: "Add update" }).click(),
  ]).then(([r]) => r);
  t.equal(res?.status(), 400);
  const again = page.locator("article.post", { hasText: "Webhook deliveries delayed" });
  t.match(await again.locator(".field-error").textContent(), /must not be empty/);
  t.equal(await again.getByLabel("Update", { exact: true }).getAttribute("aria-invalid"), "true");
  await axe(t, page, "posts with an update error");
  await again.getByLabel("New status", { exact: true }).selectOption("identified");
  await again
    .getByLabel("Update", { exact: true })
    .fill("A queue consumer in one region stalled; deliveries are catching up as it restarts.");
  await Promise.all([page.waitForNavigation(), again.getByRole("button", { name: "Add update" }).click()]);
  t.match(await page.locator(".notice").textContent(), /update is published/);
  const updated = page.locator("article.post", { hasText: "Webhook deliveries delayed" });
  t.match(await updated.locator(".badge").textContent(), /Identified/);
  t.equal(await updated.locator("ol.updates li").count(), 2, "two updates");
  await axe(t, page, "incident posts");

  // the public page, opened without a session
  const pub = `${v.url}/status/${SLUG}`;
  const light = await visitor(t, b, pub, { width: 390, height: 844 });
  t.equal(light.res?.status(), 200, "the public page answers");
  t.same(
    light.cookies.filter((c) => c.name === "vigil_session"),
    [],
    "no session cookie",
  );
  const lp = light.page;
  t.equal(await lp.locator("h1").textContent(), "Acme Cloud");
  t.match(await lp.locator(".banner").textContent(), /outage/i, "the overall state");
  const active = lp.locator('section[aria-labelledby="active-h"]');
  t.match(await active.textContent(), /Webhook deliveries delayed/);
  t.match(await active.textContent(), /A queue consumer in one region stalled/);
  t.match(await active.textContent(), /We are investigating/);
  t.match(await active.textContent(), /Identified/);
  t.equal(await lp.locator("li.component").count(), 5, "five components");
  t.equal(await lp.locator(".ub").count(), 5, "a bar each");
  t.equal(await lp.locator(".ub").first().locator("i").count(), 90, "of 90 days");
  t.ok((await lp.locator(".ub i.b").count()) > 0, "red days");
  t.ok((await lp.locator(".ub i.w").count()) > 0, "amber days");
  t.match(await lp.locator("li.component", { hasText: "Webhooks" }).textContent(), /Major outage/);
  const html = await lp.content();
  for (const c of COMPONENTS) t.notOk(html.includes(c.internal), `${c.internal} is never shown`);
  for (const id of ids) t.notOk(html.includes(id), "no connection id either");
  t.notOk(html.includes("10.0.3.17"), "nor an incident's internal title");
  t.match(
    await lp.locator("li.component", { hasText: "Webhooks" }).locator("summary").textContent(),
    /Outage history \(2\)/,
    "the webhooks' outages: by their times",
  );
  const width = await lp.evaluate(() => document.documentElement.scrollWidth);
  t.ok(width <= 390, `no sideways scroll at 390 px (scrollWidth ${width})`);
  await axe(t, lp, "public page (light, 390 px)");
  await docShot(lp, "status-page-phone", false);

  const dark = await visitor(t, b, pub, { width: 390, height: 844, colorScheme: "dark" });
  const darkWidth = await dark.page.evaluate(() => document.documentElement.scrollWidth);
  t.ok(darkWidth <= 390, `no sideways scroll at 390 px, dark (scrollWidth ${darkWidth})`);
  await axe(t, dark.page, "public page (dark, 390 px)");

  // the docs' wide screenshots
  const wideLight = await visitor(t, b, pub, { width: 1000, height: 1250 });
  await axe(t, wideLight.page, "public page (light, 1000 px)");
  await docShot(wideLight.page, "status-page-light", false);
  const wideDark = await visitor(t, b, pub, { width: 1000, height: 1250, colorScheme: "dark" });
  await axe(t, wideDark.page, "public page (dark, 1000 px)");
  await docShot(wideDark.page, "status-page-dark", false);

  // without JavaScript: the same page, bars and components
  const noJs = await visitor(t, b, pub, { width: 390, height: 844, javaScript: false });
  t.equal(noJs.res?.status(), 200);
  t.ok(await noJs.page.locator(".banner").isVisible(), "the overall state shows without JavaScript");
  t.equal(await noJs.page.locator("li.component").count(), 5, "the components too");
  t.equal(await noJs.page.locator(".ub i").count(), 450, "and their bars");
  t.ok(await noJs.page.locator(".ub").first().isVisible());

  // a title with <script> is text, on the public page and in the dashboard
  const evil = '<script>alert("boo")</script> Sign-in errors';
  await page.goto(`${v.url}/status-pages/${pageId}`);
  await page.getByLabel("Title", { exact: true }).fill(evil);
  await page.getByLabel("Status", { exact: true }).selectOption("resolved");
  await page.getByLabel("Message", { exact: true }).fill("<b>Fixed</b> at 10:12 UTC.");
  await submit(page, "Publish post");
  t.equal(
    await page.locator("article.post h3", { hasText: "Sign-in errors" }).textContent(),
    evil,
    "shown as text in the dashboard",
  );
  const after = await visitor(t, b, pub);
  const past = after.page.locator('section[aria-labelledby="past-h"]');
  t.equal(await past.locator("article.post h4").first().textContent(), evil, "shown as text to visitors");
  t.match(await past.textContent(), /<b>Fixed<\/b> at 10:12 UTC\./);
  t.equal(await after.page.locator("script").count(), 0, "no script element on the public page");

  // remove that post, after the confirmation
  let asked = "";
  page.once("dialog", (d) => {
    asked = d.message();
    void d.accept();
  });
  const evilPost = page.locator("article.post", { hasText: "Sign-in errors" });
  t.equal(
    await evilPost.getByRole("button", { name: /^Remove post/ }).textContent(),
    `Remove post: ${evil}`,
    "the remove button names its post",
  );
  await Promise.all([
    page.waitForNavigation(),
    evilPost.getByRole("button", { name: /^Remove post/ }).click(),
  ]);
  t.match(asked, /Remove the post/);
  t.match(await page.locator(".notice").textContent(), /was removed/);
  t.equal(await page.locator("article.post").count(), 1, "one post left");
  const gone = await visitor(t, b, pub);
  t.notMatch(await gone.page.content(), /Sign-in errors/, "gone from the public page");

  // the settings: filled with the page, saved
  await page.getByRole("link", { name: "Settings", exact: true }).click();
  await page.waitForURL(/\/edit$/);
  t.equal(await page.getByLabel("Slug", { exact: true }).inputValue(), SLUG);
  t.equal(await page.getByLabel("Public name, row 5", { exact: true }).inputValue(), "Payments");
  t.equal(await page.getByLabel("Connection, row 5", { exact: true }).inputValue(), ids[4]);
  t.equal(await page.locator(".rows-table tbody tr").count(), 10, "the five components and five empty rows");
  await axe(t, page, "page settings");
  await page.getByLabel("Title", { exact: true }).fill("Acme Cloud status");
  await page.getByLabel("Public name, row 1", { exact: true }).fill("Public API");
  res = await submit(page, "Save page");
  t.equal(res?.status(), 200);
  t.match(await page.locator(".notice").textContent(), /status page was saved/);
  const renamed = await visitor(t, b, pub);
  t.equal(await renamed.page.locator("h1").textContent(), "Acme Cloud status");
  t.match(await renamed.page.locator("li.component").first().textContent(), /Public API/);

  // a logo uploaded through the settings form (multipart): the public page shows those very bytes
  const logoField = () => page.getByLabel(/^(New logo|Logo) file$/);
  const storedPage = async () =>
    (await api(`/v1/status-pages/${pageId}`)).body as {
      title: string;
      logo: { content_type: string; bytes: number; url: string } | null;
    };
  t.equal(await logoField().getAttribute("type"), "file", "the settings form has a labelled file input");
  t.equal(await page.locator("#edit-page").getAttribute("enctype"), "multipart/form-data");
  await logoField().setInputFiles({ name: "acme.png", mimeType: "image/png", buffer: PNG });
  res = await submit(page, "Save page");
  t.equal(res?.status(), 200, "the upload is saved");
  t.match(await page.locator(".notice").textContent(), /status page was saved/);
  t.match(await page.locator("#sp-logo-current").textContent(), /A PNG image of 1 KiB is shown/);
  const withLogo = await visitor(t, b, pub);
  const img = withLogo.page.locator("img.logo");
  t.equal(await img.count(), 1, "the public page shows the logo");
  const src = new URL((await img.getAttribute("src")) ?? "", pub).href;
  t.ok(
    await img.evaluate(
      (el) => (el as HTMLImageElement).complete && (el as HTMLImageElement).naturalWidth > 0,
    ),
    "and the browser loaded it",
  );
  const logoRes = await fetch(src);
  t.equal(logoRes.status, 200);
  t.equal(logoRes.headers.get("content-type"), "image/png");
  t.same(Buffer.from(await logoRes.arrayBuffer()), PNG, "the bytes uploaded");
  const logoBefore = (await storedPage()).logo;

  // a text file named .png: the core's message next to the field, the title not changed either
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-logo-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const textPng = path.join(dir, "notes.png");
  fs.writeFileSync(textPng, "These are release notes, not an image.\n");
  await page.getByLabel("Title", { exact: true }).fill("Acme Cloud, renamed");
  await logoField().setInputFiles(textPng);
  res = await submit(page, "Save page");
  t.equal(res?.status(), 400, "a file that is not an image is a 400");
  t.match(await page.locator("#sp-logo-error").textContent(), /is not an image/);
  t.equal(await logoField().getAttribute("aria-invalid"), "true");
  t.match(await logoField().getAttribute("aria-describedby"), /sp-logo-error/);
  t.equal(await page.getByLabel("Title", { exact: true }).inputValue(), "Acme Cloud, renamed", "values kept");
  await axe(t, page, "settings with a logo error");
  const unchanged = await storedPage();
  t.equal(unchanged.title, "Acme Cloud status", "nothing changed: the title");
  t.same(unchanged.logo, logoBefore, "nor the logo");

  // a file over 256 KiB: said next to the field, nothing changed
  const big = Buffer.concat([PNG, Buffer.alloc(256 * 1024 + 1 - PNG.length, 7)]);
  await logoField().setInputFiles({ name: "huge.png", mimeType: "image/png", buffer: big });
  res = await submit(page, "Save page");
  t.equal(res?.status(), 413, "a file over 256 KiB is a 413");
  t.match(await page.locator("#sp-logo-error").textContent(), /huge\.png is larger than 256 KiB/);
  t.same((await storedPage()).logo, logoBefore, "the logo is not changed");
  t.equal((await storedPage()).title, "Acme Cloud status", "nor the title");

  // a new file and "Remove the logo" at once: refused rather than guessed
  await logoField().setInputFiles({ name: "acme.png", mimeType: "image/png", buffer: PNG });
  await page.getByLabel("Remove the logo").check();
  res = await submit(page, "Save page");
  t.equal(res?.status(), 400);
  t.match(await page.locator("#sp-logo-error").textContent(), /not both/);

  // the multipart form without its CSRF token: the dashboard's 403 page, nothing changed
  await page.goto(`${v.url}/status-pages/${pageId}/edit`);
  await page.getByLabel("Title", { exact: true }).fill("Forged title");
  await logoField().setInputFiles({ name: "acme.png", mimeType: "image/png", buffer: PNG });
  await page.locator('#edit-page input[name="_csrf"]').evaluate((el) => el.remove());
  res = await submit(page, "Save page");
  t.equal(res?.status(), 403, "refused without a CSRF token");
  t.match(await page.locator("p.error").textContent(), /The form expired or came from another site/);
  t.equal((await storedPage()).title, "Acme Cloud status", "nothing changed");

  // an empty file input keeps the logo; "Remove the logo" removes it
  await page.goto(`${v.url}/status-pages/${pageId}/edit`);
  await page.getByLabel("Title", { exact: true }).fill("Acme Cloud status");
  res = await submit(page, "Save page");
  t.equal(res?.status(), 200);
  t.same((await storedPage()).logo, logoBefore, "an empty file input keeps the logo");
  await page.getByLabel("Remove the logo").check();
  await submit(page, "Save page");
  t.equal((await storedPage()).logo, null, "removed");
  t.match(await page.locator("#sp-logo-current").textContent(), /No logo/);
  t.equal(await (await visitor(t, b, pub)).page.locator("img.logo").count(), 0, "gone from the public page");

  // a second page titled with a script, listed as text, then deleted after the confirmation
  await page.goto(`${v.url}/status-pages`);
  await page.getByLabel("Slug", { exact: true }).fill("beta-status");
  await page.getByLabel("Title", { exact: true }).fill('Beta <script>alert("x")</script>');
  await fillRow(0, "Beta", COMPONENTS[0]?.internal ?? "", "Beta API");
  await page.getByLabel("Logo file", { exact: true }).setInputFiles({
    name: "beta.png",
    mimeType: "image/png",
    buffer: PNG,
  });
  await submit(page, "Create page");
  t.match(page.url(), /notice=created$/);
  t.equal(await page.locator("h1").textContent(), 'Beta <script>alert("x")</script>');
  const beta = await visitor(t, b, `${v.url}/status/beta-status`);
  t.equal(await beta.page.locator("h1").textContent(), 'Beta <script>alert("x")</script>');
  t.equal(await beta.page.locator("img.logo").count(), 1, "a logo chosen in the create form is shown");
  t.equal(await beta.page.locator("script").count(), 0);
  await page.goto(`${v.url}/status-pages`);
  t.equal(await page.locator("#pages-table tbody tr").count(), 2);
  t.equal(
    await page.locator("#pages-table tbody tr").nth(1).locator("td").first().textContent(),
    'Beta <script>alert("x")</script>',
  );
  await page.getByRole("link", { name: 'Settings of Beta <script>alert("x")</script>' }).click();
  await page.waitForURL(/\/edit$/);
  page.once("dialog", (d) => {
    asked = d.message();
    void d.accept();
  });
  await submit(page, "Delete page");
  t.match(asked, /Delete the status page/);
  t.match(page.url(), /\/status-pages\?notice=deleted$/);
  t.equal(await page.locator("#pages-table tbody tr").count(), 1, "deleted");
  t.equal((await visitor(t, b, `${v.url}/status/beta-status`)).res?.status(), 404, "its public page is gone");

  // the dashboard's pages in dark, at a phone's width
  const { page: phone } = await newPage(t, b, { colorScheme: "dark", viewport: { width: 390, height: 844 } });
  await signIn(phone, v.url, OWNER.email, OWNER.password);
  for (const [label, url] of [
    ["list", "/status-pages"],
    ["posts", `/status-pages/${pageId}`],
    ["settings", `/status-pages/${pageId}/edit`],
  ] as const) {
    await phone.goto(`${v.url}${url}`);
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    t.ok(overflow <= 1, `${label}: no sideways scroll of the page at 390 px`);
    await axe(t, phone, `status pages ${label} (dark, 390 px)`);
  }
});
