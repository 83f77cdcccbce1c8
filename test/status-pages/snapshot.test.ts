import t from "tap";
import { writeSamples } from "../../src/availability/samples.js";
import { recordStatus } from "../../src/connections/status.js";
import { type IncidentKind, openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { rollUp } from "../../src/retention/rollups.js";
import type { PublicComponent, PublicSnapshot } from "../../src/status-pages/public-model.js";
import { renderSummary } from "../../src/status-pages/render/summary.js";
import { selectPublicPage } from "../../src/status-pages/repository.js";
import { buildSnapshot } from "../../src/status-pages/snapshot.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * The snapshot builder (src/status-pages/snapshot.ts) against real stores: what a visitor's page
 * is made of. The 90 day cells, the 24 h / 7 d / 30 d / 90 d uptime and the response time equal
 * what an independent count of the samples written says (days in the past, with checks under
 * maintenance apart, and today), before and after the rollup job and with samples written after
 * it; response times only on a page that shows them; each component's state from its status,
 * incidents and maintenance (an anomaly or budget incident changes nothing a visitor sees); the
 * overall indicator; maintenance under way and scheduled; automatic outages by their times only.
 * On PGlite, PostgreSQL and PGlite with the QuestDB series store.
 */

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const NOW = Date.parse("2026-11-20T12:00:00.000Z");
const TODAY = Math.floor(NOW / DAY) * DAY;
const iso = (ms: number) => new Date(ms).toISOString();

interface Written {
  at: number;
  ok: boolean;
  ms: number | null;
  maintenance: boolean;
}

/**
 * 92 days of checks: 3 to 6 a past day, some failing, one failing check under maintenance every
 * tenth day, a day without checks every thirteenth; today 11 checks before noon, 2 failing.
 * Days 90 and 91 lie before the bar.
 */
function history(): Written[] {
  const out: Written[] = [];
  for (let d = 0; d <= 91; d++) {
    if (d % 13 === 6) continue;
    const n = d === 0 ? 11 : 3 + (d % 4);
    for (let i = 0; i < n; i++) {
      const at = d === 0 ? TODAY + 30 * MIN + i * HOUR : TODAY - d * DAY + (2 + 3 * i) * HOUR + 7 * MIN;
      const maintenance = d % 10 === 4 && i === n - 1;
      const ok = !maintenance && (d === 0 ? i !== 2 && i !== 7 : i >= d % 3);
      out.push({ at, ok, ms: ok ? 100 + d + 10 * i : i % 2 ? 30 : null, maintenance });
    }
  }
  return out;
}

const percent = (up: number, checks: number) => (checks ? Math.round((up / checks) * 100_000) / 1000 : null);
const mean = (sum: number, n: number) => (n ? Math.round((sum / n) * 10) / 10 : null);

/** What the samples of [from, to) count, maintenance apart. */
function tally(samples: Written[], from: number, to: number) {
  const inside = samples.filter((s) => s.at >= from && s.at < to);
  const counted = inside.filter((s) => !s.maintenance);
  const timed = counted.filter((s) => s.ms !== null);
  return {
    checks: counted.length,
    available: counted.filter((s) => s.ok).length,
    maintenance: inside.length - counted.length,
    avgResponseMs: mean(
      timed.reduce((a, s) => a + (s.ms ?? 0), 0),
      timed.length,
    ),
  };
}

/** The bar, uptime and response time a page must show for these samples, counted here. */
function expected(samples: Written[], showResponseTimes: boolean) {
  const days = Array.from({ length: 90 }, (_, i) => {
    const start = TODAY - (89 - i) * DAY;
    const c = tally(samples, start, start + DAY);
    return {
      date: iso(start).slice(0, 10),
      checks: c.checks,
      available: c.available,
      maintenance: c.maintenance,
      avgResponseMs: showResponseTimes ? c.avgResponseMs : null,
    };
  });
  const since = (days: number) => {
    const c = tally(samples, TODAY - (days - 1) * DAY, NOW);
    return percent(c.available, c.checks);
  };
  const day = tally(samples, NOW - DAY, NOW);
  return {
    days,
    uptime: { "24h": percent(day.available, day.checks), "7d": since(7), "30d": since(30), "90d": since(90) },
    responseMs: showResponseTimes ? day.avgResponseMs : null,
  };
}

const componentOf = (s: PublicSnapshot, name: string): PublicComponent => {
  const c = s.groups.flatMap((g) => g.components).find((x) => x.name === name);
  if (!c) throw new Error(`no component ${name}`);
  return c;
};

async function snapshotOf(ta: TestApp, slug: string): Promise<PublicSnapshot> {
  const page = await selectPublicPage(ta.ctx.stores.db, { slug });
  if (!page) throw new Error(`no page ${slug}`);
  return buildSnapshot(ta.ctx, page);
}

const backends: ["pglite" | "postgres", BackendName][] = [
  ["pglite", "pglite"],
  ["postgres", "postgres"],
  ["pglite", "questdb"],
];

for (const [relational, series] of backends) {
  t.test(`the snapshot a visitor reads, from the stores (${relational}, ${series})`, async (t) => {
    if (!(await requireBackend(t, relational)) || !(await requireBackend(t, series))) return;
    const ta = await testApp(t, { relational, series });
    const { app, ctx } = ta;
    ctx.now = () => new Date(NOW);
    const db = ctx.stores.db;
    const w = await seedTenants(ta);
    const alice = w.keys.alicePersonal;
    const api = w.conns.PA;

    const gateway = async (name: string) => {
      const res = await call(app, alice, "POST", "/v1/connections", {
        service_type: "gateway",
        service_name: name,
      });
      t.equal(res.statusCode, 201, res.body);
      return (res.json() as { connection: { id: string } }).connection.id;
    };
    const down = await gateway("internal down");
    const burning = await gateway("internal burning");
    const noisy = await gateway("internal noisy");
    const fresh = await gateway("internal fresh");
    const maint = await gateway("internal maintained");
    const later = await gateway("internal later");
    const silent = await gateway("internal silent");
    const broken = await gateway("internal broken");
    const names: Record<string, string> = {
      [api]: "alice n8n",
      [down]: "internal down",
      [burning]: "internal burning",
      [noisy]: "internal noisy",
      [fresh]: "internal fresh",
      [maint]: "internal maintained",
      [later]: "internal later",
      [silent]: "internal silent",
      [broken]: "internal broken",
    };

    // the history of PA, as stored: explicit maintenance flags (the past windows are gone)
    const samples = history();
    await ctx.stores.series.append(
      availabilitySamples,
      samples.map((s) => ({
        ts: new Date(s.at),
        connection_id: api,
        available: s.ok,
        response_time_ms: s.ms,
        status_code: s.ok ? 200 : 503,
        reason: s.ok ? null : "http_status",
        error: null,
        synthetic: false,
        source: "probe",
        maintenance: s.maintenance,
      })),
    );
    await ctx.stores.series.waitVisible();

    // statuses as the probes write them: every one checked but `fresh` (inactive: never checked)
    for (const id of [api, down, burning, noisy, maint, later, silent])
      await db.transaction((tx) => recordStatus(tx, id, { type: "check_succeeded" }, new Date(NOW - HOUR)));
    // bad credentials: error at once, with no incident
    await db.transaction((tx) =>
      recordStatus(
        tx,
        broken,
        { type: "check_failed", badCredentials: true, failures: 1, threshold: 3 },
        new Date(NOW - HOUR),
      ),
    );
    const titles: string[] = [];
    const target = (id: string) => ({
      connectionId: id,
      connectionName: names[id] ?? id,
      userId: w.users.alice.id,
      organizationId: null,
    });
    const open = async (id: string, kind: IncidentKind, at: number) => {
      const title = `INTERNAL ${kind} of ${names[id]}`;
      titles.push(title);
      const made = await db.transaction((tx) =>
        openIncident(tx, target(id), {
          kind,
          title,
          detail: { failures: 3 },
          at: new Date(at),
          publicUrl: ctx.config.publicUrl,
          failureMailIntervalSeconds: 0,
        }),
      );
      t.ok(made, `${kind} incident opened on ${names[id]}`);
    };
    const resolve = (id: string, kind: IncidentKind, at: number) =>
      db.transaction((tx) =>
        resolveIncident(tx, target(id), {
          kind,
          detail: {},
          at: new Date(at),
          publicUrl: ctx.config.publicUrl,
        }),
      );
    // PA: an outage 100 days ago (before the bar) and one 3 days ago, both over
    await open(api, "availability", NOW - 100 * DAY);
    await resolve(api, "availability", NOW - 100 * DAY + HOUR);
    await open(api, "availability", NOW - 3 * DAY);
    await resolve(api, "availability", NOW - 3 * DAY + 90 * MIN);
    await open(down, "availability", NOW - 20 * MIN);
    await open(burning, "slo_burn", NOW - HOUR);
    await open(noisy, "anomaly", NOW - HOUR);
    await open(noisy, "budget", NOW - 2 * HOUR);
    await open(silent, "missed_heartbeat", NOW - 10 * MIN);

    const window = async (id: string, from: number, to: number) => {
      const res = await call(app, alice, "POST", "/v1/maintenance-windows", {
        connection_ids: [id],
        starts_at: iso(from),
        ends_at: iso(to),
      });
      t.equal(res.statusCode, 201, res.body);
    };
    await window(maint, NOW - 30 * MIN, NOW + HOUR);
    await window(later, NOW + 3 * DAY, NOW + 3 * DAY + 2 * HOUR);
    await window(later, NOW + 10 * DAY, NOW + 10 * DAY + HOUR);

    const page = async (slug: string, showResponseTimes: boolean, groups: [string, [string, string][]][]) => {
      const res = await call(app, alice, "POST", "/v1/status-pages", {
        slug,
        title: slug,
        show_response_times: showResponseTimes,
        groups: groups.map(([name, components]) => ({
          name,
          components: components.map(([id, display]) => ({ connection_id: id, display_name: display })),
        })),
      });
      t.equal(res.statusCode, 201, res.body);
    };
    await page("all-states", true, [
      [
        "Core",
        [
          [api, "API"],
          [down, "Down"],
          [burning, "Burning"],
          [noisy, "Noisy"],
        ],
      ],
      [
        "Other",
        [
          [fresh, "Fresh"],
          [maint, "Maintained"],
          [later, "Later"],
        ],
      ],
    ]);
    await page("only-down", true, [["G", [[down, "Down"]]]]);
    await page("more-states", true, [
      [
        "G",
        [
          [silent, "Silent"],
          [broken, "Broken"],
        ],
      ],
    ]);
    await page("only-burning", true, [["G", [[burning, "Burning"]]]]);
    await page("only-maint", true, [["G", [[maint, "Maintained"]]]]);
    await page("quiet", false, [
      [
        "G",
        [
          [api, "API"],
          [noisy, "Noisy"],
        ],
      ],
    ]);

    await t.test("90 day cells, uptime and response time: the samples' own count", async (t) => {
      const s = await snapshotOf(ta, "all-states");
      t.equal(s.generatedAt, iso(NOW));
      const c = componentOf(s, "API");
      const want = expected(samples, true);
      t.equal(c.days.length, 90, "90 cells");
      t.equal(c.days[0]?.date, "2026-08-23", "oldest first");
      t.equal(c.days[89]?.date, "2026-11-20", "today last");
      t.same(c.days, want.days, "each day: checks, available, checks under maintenance, mean response time");
      t.same(c.days[89], {
        date: "2026-11-20",
        checks: 11,
        available: 9,
        maintenance: 0,
        avgResponseMs: want.days[89]?.avgResponseMs,
      });
      t.same(
        c.days.filter((d) => d.checks === 0).map((d) => d.date),
        want.days.filter((d) => d.checks === 0).map((d) => d.date),
        "days without checks are empty",
      );
      t.ok(
        c.days.some((d) => d.maintenance > 0),
        "some days have a check under maintenance, not in their checks",
      );
      t.same(c.uptime, want.uptime, "24 h, 7 d, 30 d and 90 d");
      t.ok(want.uptime["90d"] !== null && want.uptime["90d"] < 100, "with failures to count");
      t.equal(c.responseMs, want.responseMs, "the mean response time of the last 24 h");

      const quiet = componentOf(await snapshotOf(ta, "quiet"), "API");
      const hidden = expected(samples, false);
      t.same(quiet.days, hidden.days, "a page that hides response times: the same days without them");
      t.ok(
        quiet.days.every((d) => d.avgResponseMs === null),
        "no day's response time",
      );
      t.equal(quiet.responseMs, null, "nor the last 24 h's");
      t.same(quiet.uptime, want.uptime, "the same uptime");
      t.notOk(
        "response_time_ms" in (renderSummary(await snapshotOf(ta, "quiet")).components[0] ?? {}),
        "summary.json has no response_time_ms",
      );

      for (const name of ["Fresh", "Later"]) {
        const none = componentOf(s, name);
        t.ok(
          none.days.every((d) => d.checks === 0 && d.available === 0),
          `${name}: no checks, no cells`,
        );
        t.same(none.uptime, { "24h": null, "7d": null, "30d": null, "90d": null }, `${name}: no uptime`);
        t.equal(none.responseMs, null);
      }
    });

    await t.test("after the rollup job, and with samples written after it", async (t) => {
      await rollUp(ctx);
      const rolled = componentOf(await snapshotOf(ta, "all-states"), "API");
      const want = expected(samples, true);
      t.same(rolled.days, want.days, "past days from the daily rollup, today from partial rows: the same");
      t.same(rolled.uptime, want.uptime);
      t.equal(rolled.responseMs, want.responseMs);

      // two checks since the run, one failing, and one late enough to fall before its watermark
      const more: Written[] = [
        { at: NOW - 4 * MIN, ok: true, ms: 90, maintenance: false },
        { at: NOW - 2 * MIN, ok: false, ms: null, maintenance: false },
        { at: NOW - 25 * MIN, ok: false, ms: 40, maintenance: false },
      ];
      await writeSamples(
        ctx,
        more.map((s) => ({
          ts: new Date(s.at),
          connection_id: api,
          available: s.ok,
          response_time_ms: s.ms,
          status_code: s.ok ? 200 : 503,
          reason: s.ok ? null : "http_status",
          error: null,
          synthetic: false,
          source: "probe",
        })),
      );
      await ctx.stores.series.waitVisible();
      const all = [...samples, ...more];
      const now = componentOf(await snapshotOf(ta, "all-states"), "API");
      const after = expected(all, true);
      t.same(now.days[89], after.days[89], "today's cell counts them");
      t.equal(now.days[89]?.checks, 14);
      t.same(now.days, after.days);
      t.same(now.uptime, after.uptime);
      t.equal(now.responseMs, after.responseMs);
    });

    await t.test("each component's state, and the overall indicator", async (t) => {
      const s = await snapshotOf(ta, "all-states");
      t.same(
        s.groups.map((g) => [g.name, g.components.map((c) => [c.name, c.state])]),
        [
          [
            "Core",
            [
              ["API", "operational"],
              ["Down", "major_outage"],
              ["Burning", "partial_outage"],
              ["Noisy", "operational"],
            ],
          ],
          [
            "Other",
            [
              ["Fresh", "unknown"],
              ["Maintained", "under_maintenance"],
              ["Later", "operational"],
            ],
          ],
        ],
        "an open outage: major; an SLO burn: partial; anomaly and budget: nothing; inactive: unknown; a window now: maintenance",
      );
      t.same(s.overall, { indicator: "major", description: "Partial outage" }, "one of seven down");
      const more = await snapshotOf(ta, "more-states");
      t.same(
        more.groups[0]?.components.map((c) => [c.name, c.state]),
        [
          ["Silent", "major_outage"],
          ["Broken", "major_outage"],
        ],
        "a missed heartbeat, and status error without an incident: major",
      );
      t.same(more.overall, { indicator: "critical", description: "Major outage" }, "all down: critical");
      t.same(
        componentOf(more, "Silent").outages,
        [{ startedAt: iso(NOW - 10 * MIN), resolvedAt: null }],
        "a missed heartbeat is an outage",
      );
      t.same(componentOf(more, "Broken").outages, [], "a status alone is none");
      const overall = async (slug: string) => (await snapshotOf(ta, slug)).overall;
      t.same(await overall("only-down"), { indicator: "critical", description: "Major outage" });
      t.same(await overall("only-burning"), { indicator: "major", description: "Partial outage" });
      t.same(await overall("only-maint"), { indicator: "maintenance", description: "Under maintenance" });
      t.same(
        await overall("quiet"),
        { indicator: "none", description: "All systems operational" },
        "anomaly and budget incidents stay internal",
      );
    });

    await t.test("maintenance under way and scheduled, by component names", async (t) => {
      const s = await snapshotOf(ta, "all-states");
      t.same(
        s.maintenance,
        [
          {
            startsAt: iso(NOW - 30 * MIN),
            endsAt: iso(NOW + HOUR),
            active: true,
            components: ["Maintained"],
          },
          {
            startsAt: iso(NOW + 3 * DAY),
            endsAt: iso(NOW + 3 * DAY + 2 * HOUR),
            active: false,
            components: ["Later"],
          },
        ],
        "the window now and the one in 3 days; not the one in 10 days",
      );
      t.same(
        (await snapshotOf(ta, "only-down")).maintenance,
        [],
        "a page lists its own components' windows only",
      );
    });

    await t.test("outages: the times of automatic incidents, nothing else", async (t) => {
      const s = await snapshotOf(ta, "all-states");
      t.same(
        componentOf(s, "API").outages,
        [{ startedAt: iso(NOW - 3 * DAY), resolvedAt: iso(NOW - 3 * DAY + 90 * MIN) }],
        "the outage of 3 days ago; not the one before the bar",
      );
      t.same(
        componentOf(s, "Down").outages,
        [{ startedAt: iso(NOW - 20 * MIN), resolvedAt: null }],
        "unresolved",
      );
      for (const name of ["Burning", "Noisy", "Fresh"])
        t.same(componentOf(s, name).outages, [], `${name}: none`);
      for (const c of s.groups.flatMap((g) => g.components))
        for (const o of c.outages)
          t.same(Object.keys(o).sort(), ["resolvedAt", "startedAt"], `${c.name}: times only`);
      const text = JSON.stringify(s);
      const leaks = [...titles, ...Object.keys(names), ...Object.values(names)].filter((x) =>
        text.includes(x),
      );
      t.same(leaks, [], "no incident title, connection id or name in the snapshot");
    });
  });
}
