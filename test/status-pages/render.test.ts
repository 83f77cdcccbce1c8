import { createHash } from "node:crypto";
import t from "tap";
import { type Element, xml2js } from "xml-js";
import type { PublicSnapshot } from "../../src/status-pages/public-model.js";
import { componentBadge, pageBadge } from "../../src/status-pages/render/badges.js";
import { renderAtomFeed } from "../../src/status-pages/render/feed.js";
import { dayClass, renderStatusPage } from "../../src/status-pages/render/html.js";
import { STATUS_PAGE_CSS, STATUS_PAGE_STYLE_HASH } from "../../src/status-pages/render/style.js";
import { badgePath, renderSummary } from "../../src/status-pages/render/summary.js";
import { durationText, percentText } from "../../src/status-pages/render/words.js";
import { PAST_POST, SAMPLE_DAYS, sampleComponent, sampleSnapshot } from "./fixture.js";

/**
 * The public renderings of a status page (issue #34) from hand-built snapshots: what a visitor, a
 * feed reader and a README would get. Member-written text with markup in every field, the page's
 * CSP hash against the style element it really has, the 90-day bars' cells, links under both
 * doors, badges and the Shields endpoint, summary.json, and a page that hides response times.
 * The same page in Chromium (axe, 390 px, dark) is the route layer's browser test.
 */

const EVIL = `<script>alert(1)</script> " onerror="x' & &amp;`;

/** Every member-written text of the sample set to EVIL plus a field name, so each one is findable. */
function evilSnapshot(): PublicSnapshot {
  const s = sampleSnapshot();
  const post = (p: PublicSnapshot["activePosts"][number], tag: string) => ({
    ...p,
    title: `${EVIL} ${tag}-title`,
    updates: p.updates.map((u, i) => ({ ...u, message: `${EVIL}\n${tag}-message-${i} ]]> end` })),
  });
  return {
    ...s,
    title: `${EVIL} page-title`,
    description: `${EVIL} page-description`,
    overall: { ...s.overall, description: `${EVIL} overall` },
    groups: s.groups.map((g, gi) => ({
      name: `${EVIL} group-${gi}`,
      components: g.components.map((c, ci) => ({ ...c, name: `${EVIL} component-${gi}-${ci}` })),
    })),
    activePosts: s.activePosts.map((p) => post(p, "active")),
    pastPosts: s.pastPosts.map((p) => post(p, "past")),
    maintenance: s.maintenance.map((m, mi) => ({ ...m, components: [`${EVIL} maint-${mi}`] })),
  };
}

const attrs = (html: string, name: string) =>
  [...html.matchAll(new RegExp(` ${name}="([^"]*)"`, "g"))].map((m) => m[1]);

/** The cells of every uptime bar on a page: [class, title] per day. */
function bars(html: string): { label: string; cells: [string, string][] }[] {
  return [...html.matchAll(/<div class="ub" role="img" aria-label="([^"]*)">(.*?)<\/div>/g)].map((m) => ({
    label: m[1] ?? "",
    cells: [...(m[2] ?? "").matchAll(/<i(?: class="(\w)")? title="([^"]*)"><\/i>/g)].map(
      (c): [string, string] => [c[1] ?? "", c[2] ?? ""],
    ),
  }));
}

t.test("the page escapes every member-written text and has no script", async (t) => {
  const html = renderStatusPage(evilSnapshot(), "/status/acme");
  t.notMatch(html, /<script/i, "no <script anywhere");
  t.notMatch(html, /" onerror="/, "no attribute broken out of");
  t.notMatch(html, / style="/, "no inline style attribute (the CSP allows none)");
  const fields = [
    "page-title",
    "page-description",
    "overall",
    "group-0",
    "group-1",
    "component-0-0",
    "component-0-1",
    "component-1-0",
    "active-title",
    "active-message-0",
    "active-message-1",
    "past-title",
    "past-message-0",
    "maint-0",
    "maint-1",
  ];
  const escaped = "&lt;script&gt;alert(1)&lt;/script&gt; &quot; onerror=&quot;x&#39; &amp; &amp;amp;";
  for (const f of fields) {
    t.ok(html.includes(`${escaped} ${f}`) || html.includes(`${escaped}\n${f}`), `${f}: on the page, escaped`);
  }
  t.match(html, /<title>&lt;script&gt;alert\(1\)&lt;\/script&gt;.* page-title status<\/title>/);
  t.match(
    html,
    /alt="&lt;script&gt;alert\(1\)&lt;\/script&gt; &quot; onerror=&quot;x&#39; &amp; &amp;amp; page-title logo"/,
  );
  t.match(html, /aria-label="90-day uptime of &lt;script&gt;.* component-0-0: 99\.9%"/, "the bar's name");
  t.match(html, /<p class="msg">&lt;script&gt;.*\nactive-message-0 \]\]&gt; end<\/p>/, "line breaks kept");
});

t.test("the style element is exactly what the CSP hash allows, and the only one", async (t) => {
  const html = renderStatusPage(sampleSnapshot(), "/status/acme");
  const styles = [...html.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1] ?? "");
  t.equal(styles.length, 1);
  t.equal(html.match(/<style/g)?.length, 1);
  t.equal(styles[0], STATUS_PAGE_CSS);
  const hash = `'sha256-${createHash("sha256")
    .update(styles[0] ?? "")
    .digest("base64")}'`;
  t.equal(hash, STATUS_PAGE_STYLE_HASH);
  t.match(STATUS_PAGE_STYLE_HASH, /^'sha256-[A-Za-z0-9+/]{43}='$/);
  t.notMatch(html, /<script|<link rel="stylesheet"/i, "nothing else to load or run");
  t.match(html, /<html lang="en">/);
  t.match(html, /<header class="head">[\s\S]*<main class="wrap">[\s\S]*<footer class="foot">/, "landmarks");
});

t.test("90-day bars: one cell a day, oldest left, the dashboard's colours and tooltips", async (t) => {
  const html = renderStatusPage(sampleSnapshot(), "/status/acme");
  const [api, web, worker] = bars(html);
  t.equal(bars(html).length, 3);
  for (const b of [api, web, worker]) t.equal(b?.cells.length, 90);
  const day = (date: string) => api?.cells[SAMPLE_DAYS.indexOf(date)];
  t.same(day("2026-08-30"), ["", "2026-08-30: no data"], "oldest first, no data grey");
  t.same(day("2026-11-20"), ["w", "2026-11-20: 99.86% (1,438/1,440)"], ">= 99% amber");
  t.same(day("2026-11-21"), ["b", "2026-11-21: 90.27% (1,300/1,440)"], "below 99% red");
  t.same(day("2026-11-10"), ["m", "2026-11-10: maintenance (60 checks)"], "only maintenance blue");
  t.same(day("2026-11-27"), ["o", "2026-11-27: 100% (1,440/1,440)"], "today last, green");
  t.equal(api?.label, "90-day uptime of API: 99.9%");
  t.equal(worker?.label, "90-day uptime of Workers: no data");
  t.ok(
    worker?.cells.every(([k]) => k === ""),
    "a component without checks is all grey",
  );

  const d = (checks: number, available: number, maintenance = 0) => ({
    date: "2026-11-01",
    checks,
    available,
    maintenance,
    avgResponseMs: null,
  });
  t.equal(dayClass(d(1000, 999)), "o", "99.9% is green");
  t.equal(dayClass(d(1000, 998)), "w");
  t.equal(dayClass(d(100, 99)), "w", "99% is amber");
  t.equal(dayClass(d(1000, 989)), "b");
  t.equal(dayClass(d(0, 0)), "");
  t.equal(dayClass(d(10, 10, 5)), "o", "checks outside the window count, not the window");
  t.match(html, /<span>90 days ago<\/span><span class="pct">99\.9% uptime<\/span><span>Today<\/span>/);
});

t.test("what the page says: states, posts, maintenance, outages, footer", async (t) => {
  const html = renderStatusPage(sampleSnapshot(), "/status/acme");
  t.match(html, /<p class="banner i-major">Partial outage<\/p>/);
  t.match(html, /<span class="state s-operational">Operational<\/span>/);
  t.match(html, /<span class="state s-degraded_performance">Degraded performance<\/span>/);
  t.match(html, /<span class="state s-major_outage">Major outage<\/span>/);
  t.match(
    html,
    /<h2 id="active-h">Active incidents<\/h2>\s*<article class="post card" id="post-post-active-1">/,
  );
  t.match(
    html,
    /<strong>Identified<\/strong> · <time datetime="2026-11-27T13:40:00.000Z">Nov 27, 13:40 UTC<\/time>/,
  );
  t.match(
    html,
    /In progress<\/span> <time datetime="2026-11-27T14:00:00.000Z">Nov 27, 14:00 UTC<\/time> to /,
  );
  t.match(html, /Scheduled<\/span>[^\n]*Nov 29, 02:00 UTC/);
  t.match(html, /Affects API, Web app/);
  t.match(
    html,
    /<details>\s*<summary>Outage history \(1\)<\/summary>[\s\S]*?Nov 21, 05:20 UTC<\/time> \(2 h 20 min\)/,
  );
  t.match(html, /Nov 27, 13:30 UTC<\/time> to ongoing \(35 min so far\)/);
  t.match(
    html,
    /<h3>Nov 20, 2026<\/h3>\s*<article class="post card" id="post-post-past-1">\s*<h4>Gateway errors<\/h4>/,
  );
  t.match(html, /Response time \(24 h\): 123 ms/);
  t.match(html, /Response time \(24 h\): 1,530 ms/);
  t.match(
    html,
    /Updated <time datetime="2026-11-27T14:05:00.000Z">Nov 27, 14:05 UTC<\/time> · Powered by Vigil/,
  );
  // headings in order: h1, then h2 sections, h3 groups and days, h4 components and past posts
  const levels = [...html.matchAll(/<h(\d)/g)].map((m) => Number(m[1]));
  t.equal(levels[0], 1);
  t.ok(
    levels.every((l, i) => i === 0 || l <= (levels[i - 1] ?? 0) + 1),
    `no heading level skipped: ${levels.join(",")}`,
  );

  const quiet = renderStatusPage(
    sampleSnapshot({ activePosts: [], pastPosts: [], maintenance: [], logo: null, description: null }),
    "",
  );
  t.notMatch(quiet, /Active incidents|Maintenance<\/h2>|<img|class="desc"|name="description"/);
  t.match(quiet, /No incidents in the last 90 days\./);

  const unnamed = renderStatusPage(
    sampleSnapshot({ groups: [{ name: "", components: [sampleComponent()] }] }),
    "",
  );
  t.match(
    unnamed,
    /<div class="group card">\s*<ul class="components">[\s\S]*?<h3>API<\/h3>/,
    "no empty heading",
  );
});

t.test("every link is under the door's prefix", async (t) => {
  for (const prefix of ["/status/acme", ""]) {
    const html = renderStatusPage(sampleSnapshot(), prefix);
    const links = [...attrs(html, "href"), ...attrs(html, "src")];
    for (const l of links) {
      t.ok(
        l.startsWith(`${prefix}/`) || l === "https://vigil.example/status/acme",
        `${prefix || '""'}: ${l}`,
      );
    }
    t.ok(links.includes(`${prefix}/feed.atom`));
    t.ok(links.includes(`${prefix}/summary.json`));
    t.ok(links.includes(`${prefix}/logo?v=3f2a9c`));
    t.ok(links.includes(`${prefix}/badge/apikey000001/status.svg`));
    t.ok(links.includes(`${prefix}/badge/wrkkey000003/uptime-90d.svg`));
    t.match(
      html,
      new RegExp(`<link rel="alternate" type="application/atom\\+xml" [^>]*href="${prefix}/feed.atom">`),
    );
  }
  t.equal(badgePath("", "abc", "uptime-7d", "json"), "/badge/abc/uptime-7d.json");
});

t.test("a page that hides response times shows none anywhere", async (t) => {
  // responseMs left set: the flag alone must hide it, whatever the snapshot builder did
  const s = sampleSnapshot({ showResponseTimes: false });
  const html = renderStatusPage(s, "/status/acme");
  t.notMatch(html, /Response time|\d ms|response-time|response time/);
  const summary = renderSummary(s);
  for (const c of summary.components) {
    t.notOk("response_time_ms" in c, `${c.name}: no response_time_ms`);
    t.notOk(
      "response-time" in c.badges || "response-time" in c.badges.shields,
      `${c.name}: no response-time badge`,
    );
  }
  const api = s.groups[0]?.components[0];
  if (!api) throw new Error("fixture has no component");
  t.equal(componentBadge(api, "response-time", false), null);
  t.not(componentBadge(api, "response-time", true), null);
});

t.test("summary.json: Statuspage's fields, absolute badge URLs", async (t) => {
  const summary = renderSummary(sampleSnapshot());
  t.same(summary.page, {
    name: "Acme",
    url: "https://vigil.example/status/acme",
    time_zone: "Etc/UTC",
    updated_at: "2026-11-27T14:05:00.000Z",
  });
  t.same(summary.status, { indicator: "major", description: "Partial outage" });
  t.same(
    summary.components.map((c) => [c.id, c.name, c.status, c.group_name, c.response_time_ms]),
    [
      ["apikey000001", "API", "operational", "Core", 123],
      ["webkey000002", "Web app", "degraded_performance", "Core", 1530],
      ["wrkkey000003", "Workers", "major_outage", "Background", null],
    ],
  );
  t.same(summary.components[0]?.uptime, { "24h": 100, "7d": 99.95, "30d": 99.871, "90d": 99.9 });
  const base = "https://vigil.example/status/acme/badge/apikey000001";
  t.same(summary.components[0]?.badges, {
    status: `${base}/status.svg`,
    "uptime-24h": `${base}/uptime-24h.svg`,
    "uptime-7d": `${base}/uptime-7d.svg`,
    "uptime-30d": `${base}/uptime-30d.svg`,
    "uptime-90d": `${base}/uptime-90d.svg`,
    "response-time": `${base}/response-time.svg`,
    shields: {
      status: `${base}/status.json`,
      "uptime-24h": `${base}/uptime-24h.json`,
      "uptime-7d": `${base}/uptime-7d.json`,
      "uptime-30d": `${base}/uptime-30d.json`,
      "uptime-90d": `${base}/uptime-90d.json`,
      "response-time": `${base}/response-time.json`,
    },
  });
  t.same(summary.incidents, [
    {
      id: "post-active-1",
      name: "Slow workflow runs",
      status: "identified",
      created_at: "2026-11-27T13:00:00.000Z",
      updated_at: "2026-11-27T13:40:00.000Z",
      resolved_at: null,
      shortlink: "https://vigil.example/status/acme#post-post-active-1",
      incident_updates: [
        {
          status: "identified",
          body: "A queue is backed up.\nWe are draining it.",
          created_at: "2026-11-27T13:40:00.000Z",
        },
        { status: "investigating", body: "Runs start late.", created_at: "2026-11-27T13:00:00.000Z" },
      ],
    },
  ]);
  t.same(
    summary.scheduled_maintenances.map((m) => [m.status, m.starts_at, m.components]),
    [
      ["in_progress", "2026-11-27T14:00:00.000Z", ["Workers"]],
      ["scheduled", "2026-11-29T02:00:00.000Z", ["API", "Web app"]],
    ],
  );
  t.same(JSON.parse(JSON.stringify(summary)), summary, "plain JSON");
});

/** The text of an SVG's <title>, as an XML parser reads it. */
function svgTitle(svg: string): string {
  const doc = xml2js(svg, { compact: false }) as Element;
  const title = doc.elements?.[0]?.elements?.find((e) => e.name === "title");
  return String(title?.elements?.[0]?.text ?? "");
}

t.test("badges: words, colours, the Shields endpoint, escaped names", async (t) => {
  const c = sampleComponent();
  const status = componentBadge(c, "status", true);
  t.same(status?.shields, {
    schemaVersion: 1,
    label: "API",
    message: "Operational",
    color: "brightgreen",
    cacheSeconds: 300,
  });
  t.equal(svgTitle(status?.svg ?? ""), "API: Operational");
  const colours = {
    operational: "brightgreen",
    degraded_performance: "yellow",
    partial_outage: "orange",
    major_outage: "red",
    under_maintenance: "blue",
    unknown: "lightgrey",
  } as const;
  for (const [state, colour] of Object.entries(colours)) {
    const b = componentBadge(sampleComponent({ state: state as keyof typeof colours }), "status", true);
    t.equal(b?.shields.color, colour, state);
  }
  t.equal(componentBadge(sampleComponent({ state: "unknown" }), "status", true)?.shields.message, "No data");

  const up = (p: number | null) =>
    componentBadge(
      sampleComponent({ uptime: { "24h": p, "7d": p, "30d": p, "90d": p } }),
      "uptime-30d",
      true,
    );
  t.same(
    [100, 99.95, 99.9, 99.996, 99.5, 97, 80.123, 0, null].map((p) => [
      up(p)?.shields.message,
      up(p)?.shields.color,
    ]),
    [
      ["100%", "brightgreen"],
      ["99.95%", "brightgreen"],
      ["99.9%", "brightgreen"],
      ["99.99%", "brightgreen"],
      ["99.5%", "yellow"],
      ["97%", "orange"],
      ["80.12%", "red"],
      ["0%", "red"],
      ["no data", "lightgrey"],
    ],
  );
  const c2 = sampleComponent({ uptime: { "24h": 1, "7d": 7, "30d": 30, "90d": 90 } });
  t.same(
    (["uptime-24h", "uptime-7d", "uptime-30d", "uptime-90d"] as const).map((k) => {
      const b = componentBadge(c2, k, true);
      return `${b?.shields.label}=${b?.shields.message}`;
    }),
    ["uptime 24h=1%", "uptime 7d=7%", "uptime 30d=30%", "uptime 90d=90%"],
  );
  const rt = (ms: number | null) =>
    componentBadge(sampleComponent({ responseMs: ms }), "response-time", true)?.shields;
  t.same(rt(123), {
    schemaVersion: 1,
    label: "response time",
    message: "123 ms",
    color: "brightgreen",
    cacheSeconds: 300,
  });
  t.same([rt(700)?.color, rt(1530)?.message, rt(1530)?.color], ["yellow", "1,530 ms", "orange"]);
  t.same([rt(null)?.message, rt(null)?.color], ["no data", "lightgrey"]);

  const evil = componentBadge(sampleComponent({ name: `${EVIL}\u0001 <svg onload=x>` }), "status", true);
  t.notMatch(evil?.svg ?? "", /<script|<svg onload/i);
  t.match(
    evil?.svg ?? "",
    /&lt;script&gt;alert\(1\)&lt;\/script&gt; &quot; onerror=&quot;x&apos; &amp; &amp;amp;/,
  );
  t.equal(svgTitle(evil?.svg ?? ""), `${EVIL} <svg onload=x>: Operational`, "parses as XML, the name intact");
  t.equal(
    evil?.shields.label,
    `${EVIL} <svg onload=x>`,
    "JSON carries the name as text (Shields escapes it)",
  );

  const page = pageBadge(sampleSnapshot());
  t.same(page.shields, {
    schemaVersion: 1,
    label: "status",
    message: "Partial outage",
    color: "orange",
    cacheSeconds: 300,
  });
  t.equal(
    pageBadge(sampleSnapshot({ overall: { indicator: "none", description: "All systems operational" } }))
      .shields.color,
    "brightgreen",
  );
});

/** The feed parsed by a strict XML parser: its entries' id, title, updated and content. */
function parseFeed(xml: string) {
  const doc = xml2js(xml, { compact: false }) as Element;
  const feed = doc.elements?.find((e) => e.name === "feed");
  const text = (e: Element | undefined) =>
    (e?.elements ?? []).map((x) => String(x.text ?? x.cdata ?? "")).join("");
  const child = (e: Element | undefined, name: string) => e?.elements?.find((x) => x.name === name);
  return {
    title: text(child(feed, "title")),
    author: text(child(child(feed, "author"), "name")),
    links: (feed?.elements ?? []).filter((e) => e.name === "link").map((e) => e.attributes),
    entries: (feed?.elements ?? [])
      .filter((e) => e.name === "entry")
      .map((e) => ({
        id: text(child(e, "id")),
        title: text(child(e, "title")),
        updated: text(child(e, "updated")),
        published: text(child(e, "published")),
        content: text(child(e, "content")),
      })),
  };
}

t.test("the Atom feed: every post, newest updated first, escaped", async (t) => {
  const feed = parseFeed(renderAtomFeed(sampleSnapshot()));
  t.equal(feed.title, "Acme status");
  t.same(feed.links, [
    { rel: "alternate", href: "https://vigil.example/status/acme" },
    { rel: "self", href: "https://vigil.example/status/acme/feed.atom" },
  ]);
  t.same(
    feed.entries.map((e) => [e.id, e.title, e.updated, e.published]),
    [
      [
        "https://vigil.example/status/acme#post-post-active-1",
        "[Identified] Slow workflow runs",
        "2026-11-27T13:40:00.000Z",
        "2026-11-27T13:00:00.000Z",
      ],
      [
        "https://vigil.example/status/acme#post-post-past-1",
        "[Resolved] Gateway errors",
        "2026-11-20T10:30:00.000Z",
        "2026-11-20T09:00:00.000Z",
      ],
    ],
  );
  t.match(
    feed.entries[0]?.content,
    /<strong>Identified<\/strong> · <time [^>]*>Nov 27, 13:40 UTC<\/time><br>A queue is backed up\.<br>We are draining it\./,
  );

  // a resolved post updated after the active one comes first
  const later = { ...PAST_POST, updatedAt: "2026-11-27T14:00:00.000Z" };
  t.equal(
    parseFeed(renderAtomFeed(sampleSnapshot({ pastPosts: [later] }))).entries[0]?.title,
    "[Resolved] Gateway errors",
  );
  t.equal(parseFeed(renderAtomFeed(sampleSnapshot({ activePosts: [], pastPosts: [] }))).entries.length, 0);

  const s = evilSnapshot();
  s.activePosts = s.activePosts.map((p) => ({
    ...p,
    updates: p.updates.map((u) => ({ ...u, message: `${u.message}\u0001\uFFFF` })),
  }));
  const xml = renderAtomFeed(s);
  t.notMatch(xml, /<script/i, "no <script anywhere, CDATA or not");
  const evil = parseFeed(xml);
  t.equal(evil.title, `${EVIL} page-title status`, "the feed's title as written, &amp; included");
  t.equal(evil.author, `${EVIL} page-title`);
  t.equal(evil.entries.length, 2);
  t.equal(
    evil.entries[0]?.title,
    "[Identified] &lt;script&gt;alert(1)&lt;/script&gt; &quot; onerror=&quot;x&#39; &amp; &amp;amp; active-title",
    "the title is HTML (type=html) with the member's text escaped",
  );
  t.match(
    evil.entries[0]?.content,
    /&lt;script&gt;alert\(1\)&lt;\/script&gt;[^<]*<br>active-message-0 \]\]&gt; end/,
  );
  t.ok(
    !xml.includes("\u0001") && !xml.includes("\uFFFF") && xml.includes("active-message-0 ]]&gt; end</p>"),
    "characters XML forbids are left out",
  );
});

t.test("words", async (t) => {
  t.same([99.95, 100, 99.9, 0, 99.999, 12.345].map(percentText), [
    "99.95%",
    "100%",
    "99.9%",
    "0%",
    "99.99%",
    "12.34%",
  ]);
  t.same(
    [0, 59_000, 60_000, 42 * 60_000, 3_600_000, 7_500_000, 86_400_000, 100 * 3_600_000].map(durationText),
    ["< 1 min", "< 1 min", "1 min", "42 min", "1 h", "2 h 5 min", "1 d", "4 d 4 h"],
  );
  const html = renderStatusPage(
    sampleSnapshot({
      pastPosts: [
        {
          ...PAST_POST,
          createdAt: "2025-12-30T23:10:00.000Z",
          updates: [{ status: "resolved", message: "ok", at: "2025-12-30T23:10:00.000Z" }],
        },
      ],
    }),
    "",
  );
  t.match(html, />Dec 30, 2025, 23:10 UTC</, "a time of another year says its year");
});
