import type {
  PublicComponent,
  PublicDay,
  PublicPost,
  PublicSnapshot,
  PublicUptime,
} from "../../src/status-pages/public-model.js";

/**
 * A public snapshot built by hand for the renderers' tests (and any test that needs one): two
 * groups, three components (operational, degraded, in a major outage), 90 days each, one active
 * and one resolved post, a maintenance under way and one scheduled. Fixed in time: generated at
 * SAMPLE_NOW; today is SAMPLE_DAYS.at(-1).
 */

export const SAMPLE_NOW = "2026-11-27T14:05:00.000Z";

/** The 90 UTC days of the bars, oldest first: 2026-08-30 … 2026-11-27. */
export const SAMPLE_DAYS: string[] = Array.from({ length: 90 }, (_, i) =>
  new Date(Date.parse("2026-11-27T00:00:00Z") - (89 - i) * 86_400_000).toISOString().slice(0, 10),
);

const full = (date: string): PublicDay => ({
  date,
  checks: 1440,
  available: 1440,
  maintenance: 0,
  avgResponseMs: 120,
});

/**
 * 90 days of full uptime but for `special` (by date), and no data before `from` (a component
 * added later). Known days of "API" (sampleSnapshot): 2026-11-20 1,438/1,440 (99.86%, amber),
 * 2026-11-21 1,300/1,440 (red), 2026-11-10 only maintenance (blue), 2026-08-30 … 2026-09-03 no data.
 */
export function sampleDays(special: Record<string, Partial<PublicDay>> = {}, from?: string): PublicDay[] {
  return SAMPLE_DAYS.map((date) =>
    from && date < from
      ? { date, checks: 0, available: 0, maintenance: 0, avgResponseMs: null }
      : { ...full(date), ...special[date] },
  );
}

export function sampleComponent(over: Partial<PublicComponent> = {}): PublicComponent {
  const uptime: PublicUptime = { "24h": 100, "7d": 99.95, "30d": 99.871, "90d": 99.9 };
  return {
    key: "apikey000001",
    name: "API",
    group: "Core",
    state: "operational",
    days: sampleDays(),
    uptime,
    responseMs: 123,
    outages: [],
    ...over,
  };
}

export const ACTIVE_POST: PublicPost = {
  id: "post-active-1",
  title: "Slow workflow runs",
  status: "identified",
  createdAt: "2026-11-27T13:00:00.000Z",
  updatedAt: "2026-11-27T13:40:00.000Z",
  resolvedAt: null,
  updates: [
    {
      status: "identified",
      message: "A queue is backed up.\nWe are draining it.",
      at: "2026-11-27T13:40:00.000Z",
    },
    { status: "investigating", message: "Runs start late.", at: "2026-11-27T13:00:00.000Z" },
  ],
};

export const PAST_POST: PublicPost = {
  id: "post-past-1",
  title: "Gateway errors",
  status: "resolved",
  createdAt: "2026-11-20T09:00:00.000Z",
  updatedAt: "2026-11-20T10:30:00.000Z",
  resolvedAt: "2026-11-20T10:30:00.000Z",
  updates: [
    { status: "resolved", message: "Fixed.", at: "2026-11-20T10:30:00.000Z" },
    { status: "investigating", message: "Some requests fail.", at: "2026-11-20T09:00:00.000Z" },
  ],
};

export function sampleSnapshot(over: Partial<PublicSnapshot> = {}): PublicSnapshot {
  const api = sampleComponent({
    days: sampleDays(
      {
        "2026-11-20": { checks: 1440, available: 1438 },
        "2026-11-21": { checks: 1440, available: 1300 },
        "2026-11-10": { checks: 0, available: 0, maintenance: 60, avgResponseMs: null },
      },
      "2026-09-04",
    ),
    outages: [{ startedAt: "2026-11-21T03:00:00.000Z", resolvedAt: "2026-11-21T05:20:00.000Z" }],
  });
  const web = sampleComponent({
    key: "webkey000002",
    name: "Web app",
    state: "degraded_performance",
    uptime: { "24h": 99.5, "7d": 99.2, "30d": 98.5, "90d": 94.25 },
    responseMs: 1530,
  });
  const worker = sampleComponent({
    key: "wrkkey000003",
    name: "Workers",
    group: "Background",
    state: "major_outage",
    uptime: { "24h": null, "7d": null, "30d": null, "90d": null },
    responseMs: null,
    days: sampleDays({}, "2026-12-01"),
    outages: [{ startedAt: "2026-11-27T13:30:00.000Z", resolvedAt: null }],
  });
  return {
    slug: "acme",
    title: "Acme",
    description: "Status of Acme's services.",
    logo: "3f2a9c",
    showResponseTimes: true,
    canonicalUrl: "https://vigil.example/status/acme",
    overall: { indicator: "major", description: "Partial outage" },
    groups: [
      { name: "Core", components: [api, web] },
      { name: "Background", components: [worker] },
    ],
    activePosts: [ACTIVE_POST],
    pastPosts: [PAST_POST],
    maintenance: [
      {
        startsAt: "2026-11-27T14:00:00.000Z",
        endsAt: "2026-11-27T16:00:00.000Z",
        active: true,
        components: ["Workers"],
      },
      {
        startsAt: "2026-11-29T02:00:00.000Z",
        endsAt: "2026-11-29T03:00:00.000Z",
        active: false,
        components: ["API", "Web app"],
      },
    ],
    generatedAt: SAMPLE_NOW,
    ...over,
  };
}
