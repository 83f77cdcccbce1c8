import { randomUUID } from "node:crypto";
import type { Route } from "../../src/http/route.js";
import { availabilitySamples, executions } from "../../src/stores/series/tables.js";
import type { TestApp } from "./app.js";
import { call, seedTenants, type Tenants } from "./tenants.js";

/**
 * One valid request for every route of the table, over a seeded world where every list has
 * rows, so the response test can validate real bodies against the document and the security
 * suite can replay the same requests with other keys. A route in the table without an entry
 * here fails both tests: a new endpoint cannot be forgotten.
 */

export type HttpMethod = "GET" | "POST" | "PUT" | "DELETE";

export interface SampleRequest {
  url: string;
  body?: unknown;
  /** The key that may make the request; null on public routes. */
  key: string | null;
  /** A JSON path (dot-separated) to an array that must not be empty, so row schemas are exercised. */
  rows?: string;
  /**
   * The documented status this valid request answers instead of the route's normal one (a test
   * send to a provider tests cannot reach answers 503).
   */
  status?: number;
}

export interface RouteSample {
  /** Valid requests, each answered with the route's normal status. */
  ok(w: RouteWorld): SampleRequest[];
  /**
   * The same request naming connection `id` (in the path, the query or the body), for routes
   * that take one: the security suite names another tenant's connection and an absent one.
   */
  naming?(w: RouteWorld, id: string): SampleRequest;
  /**
   * For a route whose path names an account's own resource rather than a connection (a
   * webhook): requests naming another account's one and an absent one, each answered 404, so the
   * security suite checks that the resource's existence is not revealed.
   */
  hidden?(w: RouteWorld): SampleRequest[];
}

export const routeKey = (r: Pick<Route, "method" | "path">) => `${r.method} ${r.path}`;

export type RouteWorld = Tenants & {
  /** A connection of alice's that the DELETE sample may remove. */
  throwaway: string;
  /** Incidents by connection: alice's PA (acknowledged, with a timeline) and carol's PC (open). */
  incidents: Record<string, string>;
  /** Webhooks: alice's personal one (the DELETE sample removes it) and carol's. */
  webhooks: { alice: string; carol: string };
  /** Notification channels and routing rules (seedRouteWorld; absent in the tenant matrix's world). */
  channels?: SeededChannels;
  /**
   * Maintenance windows (seedRouteWorld): alice's on PA (read), alice's spare (the DELETE sample
   * removes it), carol's on PC (another account's: 404).
   */
  maintenance?: { alice: string; aliceSpare: string; carol: string };
  /** Status pages and their incident posts (seedRouteWorld; absent in the tenant matrix's world). */
  statusPages?: SeededStatusPages;
};

/**
 * Alice's personal page on PA with a post (read, updated) and a spare post (the DELETE sample
 * removes it), alice's spare page (the DELETE sample removes it), and carol's page on PC with a
 * post (another account's: 404).
 */
export interface SeededStatusPages {
  alice: string;
  aliceSpare: string;
  carol: string;
  alicePost: string;
  aliceSparePost: string;
  carolPost: string;
}

/**
 * Alice's personal ntfy channel (its topic's host, `ntfy.invalid`, never resolves: a test send
 * answers 503), named by alice's rule; alice's Slack channel, named by no rule (the DELETE
 * sample removes it); carol's channel and rule (another account's: 404).
 */
export interface SeededChannels {
  alice: string;
  aliceSpare: string;
  carol: string;
  aliceRule: string;
  carolRule: string;
}

const seededChannels = (w: RouteWorld): SeededChannels => {
  if (!w.channels) throw new Error("this world has no seeded channels (seedRouteWorld makes them)");
  return w.channels;
};

const minutesAgo = (now: Date, m: number) => new Date(now.getTime() - m * 60_000);

/** A gateway heartbeat of the minute before `now`. */
export const sampleHeartbeat = (now: Date) => ({
  type: "heartbeat",
  gateway: { status: "healthy", latencyMs: 42, version: "2.4.1" },
  tokens: {
    period: {
      inputTokens: 3000,
      outputTokens: 1000,
      requestCount: 12,
      estimatedCostUsd: 0.5,
      startedAt: minutesAgo(now, 2).toISOString(),
      endedAt: minutesAgo(now, 1).toISOString(),
    },
    byModel: [
      { model: "claude-sonnet-4-5", inputTokens: 2000, outputTokens: 600 },
      { model: "my-local-llama", inputTokens: 1000, outputTokens: 400 },
    ],
  },
});

export const sampleUsage = (connectionId: string) => [
  { connection_id: connectionId, entity: "gpt-4o", usage_amount: 1200, cost_cents: 3.5, workflow_id: "wf1" },
  {
    connection_id: connectionId,
    entity: "vector-db",
    usage_amount: 3,
    usage_entity: "custom",
    custom_name: "queries",
    metadata: { run: 7 },
  },
];

/**
 * The tenants of `seedTenants`, plus rows in every series and relational table the read API
 * answers from: executions, availability samples, usage entries and a heartbeat (through the
 * API), incidents with a timeline event, and anomalies. Alice's personal connection PA holds
 * the workflow data; bob's gateway OB the heartbeat.
 */
export async function seedRouteWorld(ta: TestApp): Promise<RouteWorld> {
  const { app, ctx } = ta;
  const w = await seedTenants(ta);
  const { PA, OA } = w.conns;
  const now = ctx.now();
  const series = ctx.stores.series;
  await series.append(
    executions,
    [1, 2, 3].map((n) => ({
      ts: minutesAgo(now, n),
      connection_id: PA,
      execution_id: `e${n}`,
      workflow_id: n === 3 ? null : "wf1",
      status: n === 2 ? "error" : "success",
      mode: "trigger",
      stopped_at: minutesAgo(now, n - 0.5),
      duration_ms: 30_000,
      error: n === 2 ? "node X failed" : null,
      updated_at: now,
    })),
  );
  await series.append(
    availabilitySamples,
    [1, 2, 3, 4].map((n) => ({
      ts: minutesAgo(now, n),
      connection_id: n % 2 ? PA : OA,
      available: n !== 2,
      response_time_ms: n === 4 ? null : 100 + n,
      status_code: n === 2 ? 502 : 200,
      reason: n === 2 ? "bad_status" : null,
      error: n === 2 ? "status 502" : null,
      synthetic: n === 4,
      source: n === 4 ? "gap_fill" : "probe",
    })),
  );
  const usage = await call(app, w.keys.alicePersonal, "POST", "/v1/usage", sampleUsage(PA));
  if (usage.statusCode !== 201) throw new Error(`seeding usage failed: ${usage.statusCode} ${usage.body}`);
  const beat = await call(app, w.keys.ingest, "POST", "/v1/gateway/ingest", sampleHeartbeat(now));
  if (beat.statusCode !== 201) throw new Error(`seeding a heartbeat failed: ${beat.statusCode} ${beat.body}`);
  await series.waitVisible();

  const db = ctx.stores.db;
  const incident = randomUUID();
  await db.query(
    "INSERT INTO incidents (id, connection_id, kind, status, title, opened_at, acknowledged_at) VALUES ($1, $2, 'availability', 'acknowledged', 'alice n8n is down', $3, $3)",
    [incident, PA, minutesAgo(now, 5).toISOString()],
  );
  await db.query(
    "INSERT INTO incident_events (id, incident_id, at, kind, detail) VALUES ($1, $2, $3, 'opened', '{\"failures\":3}')",
    [randomUUID(), incident, minutesAgo(now, 5).toISOString()],
  );
  const foreignIncident = randomUUID();
  await db.query(
    "INSERT INTO incidents (id, connection_id, kind, status, title, opened_at) VALUES ($1, $2, 'availability', 'open', 'carol n8n is down', $3)",
    [foreignIncident, w.conns.PC, minutesAgo(now, 4).toISOString()],
  );
  await db.query(
    `INSERT INTO anomalies (id, connection_id, metric, status, detected_at, window_start, window_end, observed, baseline_mean, baseline_stddev, z_score)
     VALUES ($1, $2, 'response_time', 'open', $3, $4, $3, 900, 120, 40, 19.5)`,
    [randomUUID(), PA, minutesAgo(now, 10).toISOString(), minutesAgo(now, 70).toISOString()],
  );

  const made = await call(app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "to delete",
  });
  if (made.statusCode !== 201) throw new Error(`seeding failed: ${made.statusCode} ${made.body}`);
  const webhook = async (key: string, url: string) => {
    const res = await call(app, key, "POST", "/v1/webhooks", { url });
    if (res.statusCode !== 201) throw new Error(`seeding a webhook failed: ${res.statusCode} ${res.body}`);
    return (res.json() as { id: string }).id;
  };
  const webhooks = {
    alice: await webhook(w.keys.alicePersonal, "https://hooks.example.com/services/alice-1"),
    carol: await webhook(w.keys.carolPersonal, "https://hooks.example.com/services/carol-1"),
  };
  const post = async (key: string, url: string, body: unknown) => {
    const res = await call(app, key, "POST", url, body);
    if (res.statusCode !== 201) throw new Error(`seeding ${url} failed: ${res.statusCode} ${res.body}`);
    return (res.json() as { id: string }).id;
  };
  const window = (key: string, connection: string) =>
    post(key, "/v1/maintenance-windows", {
      connection_ids: [connection],
      starts_at: minutesAgo(now, 30).toISOString(),
      ends_at: new Date(now.getTime() + 3_600_000).toISOString(),
    });
  const maintenance = {
    alice: await window(w.keys.alicePersonal, PA),
    aliceSpare: await window(w.keys.alicePersonal, PA),
    carol: await window(w.keys.carolPersonal, w.conns.PC),
  };
  const aliceSlack = "https://hooks.slack.com/services/T0ALICE/B0ALICE/aliceSlackSecret7f3a";
  const carolSlack = "https://hooks.slack.com/services/T0CAROL/B0CAROL/carolSlackSecret91bc";
  w.secrets.push(aliceSlack, carolSlack);
  const aliceNtfy = await post(w.keys.alicePersonal, "/v1/channels", {
    type: "ntfy",
    name: "alice ntfy",
    settings: { topic_url: "https://ntfy.invalid/vigil-test", priority: 4 },
  });
  const carolChannel = await post(w.keys.carolPersonal, "/v1/channels", {
    type: "slack",
    name: "carol slack",
    settings: { webhook_url: carolSlack },
  });
  const channels: SeededChannels = {
    alice: aliceNtfy,
    aliceSpare: await post(w.keys.alicePersonal, "/v1/channels", {
      type: "slack",
      name: "alice slack",
      settings: { webhook_url: aliceSlack },
    }),
    carol: carolChannel,
    aliceRule: await post(w.keys.alicePersonal, "/v1/routing-rules", {
      channel_ids: [aliceNtfy],
      kinds: ["failure", "anomaly"],
      connection_ids: [PA],
    }),
    carolRule: await post(w.keys.carolPersonal, "/v1/routing-rules", { channel_ids: [carolChannel] }),
  };
  const page = (key: string, slug: string, connection: string) =>
    post(key, "/v1/status-pages", {
      slug,
      title: `${slug} status`,
      groups: [{ name: "Services", components: [{ connection_id: connection, display_name: "Service" }] }],
    });
  const alicePage = await page(w.keys.alicePersonal, "alice-page", PA);
  const carolPage = await page(w.keys.carolPersonal, "carol-page", w.conns.PC);
  const postOn = (key: string, pageId: string, title: string) =>
    post(key, `/v1/status-pages/${pageId}/incidents`, {
      title,
      status: "investigating",
      message: "Looking.",
    });
  const statusPages: SeededStatusPages = {
    alice: alicePage,
    aliceSpare: await page(w.keys.alicePersonal, "alice-spare", PA),
    carol: carolPage,
    alicePost: await postOn(w.keys.alicePersonal, alicePage, "Slow runs"),
    aliceSparePost: await postOn(w.keys.alicePersonal, alicePage, "Posted by mistake"),
    carolPost: await postOn(w.keys.carolPersonal, carolPage, "Carol's outage"),
  };
  return {
    ...w,
    throwaway: (made.json() as { connection: { id: string } }).connection.id,
    incidents: { [PA]: incident, [w.conns.PC]: foreignIncident },
    webhooks,
    channels,
    maintenance,
    statusPages,
  };
}

const q = (path: string, params: Record<string, string | undefined>) => {
  const s = new URLSearchParams(
    Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined),
  ).toString();
  return s ? `${path}?${s}` : path;
};

/** Read API routes: alice's personal key; `connection_id` in the query; `limit` unless `paged` is false. */
const readSample = (path: string, params: Record<string, string> = {}, paged = true): RouteSample => ({
  ok: (w) => [
    { url: q(path, params), key: w.keys.alicePersonal, rows: "data" },
    {
      url: q(path, { ...params, connection_id: w.conns.PA, limit: paged ? "1" : undefined }),
      key: w.keys.alicePersonal,
      rows: "data",
    },
  ],
  naming: (w, id) => ({ url: q(path, { ...params, connection_id: id }), key: w.keys.alicePersonal }),
});

/** Another account's channel or rule and an absent id: both 404. */
const hiddenOf =
  (path: (id: string) => string, foreign: (c: SeededChannels) => string, body?: unknown) =>
  (w: RouteWorld): SampleRequest[] => [
    { url: path(foreign(seededChannels(w))), key: w.keys.alicePersonal, body },
    { url: path("00000000-0000-4000-8000-000000000000"), key: w.keys.alicePersonal, body },
  ];
const channelPath = (id: string) => `/v1/channels/${id}`;
const rulePath = (id: string) => `/v1/routing-rules/${id}`;
const ruleUpdate = (w: RouteWorld) => ({
  channel_ids: [seededChannels(w).alice],
  kinds: ["failure"],
  send_recoveries: false,
});

/**
 * Notification channels, routing rules and settings (docs/channels.md): the key's account's own,
 * as webhooks; another account's channel or rule is not found.
 */
const channelSamples: Record<string, RouteSample> = {
  "POST /v1/channels": {
    ok: (w) => [
      {
        url: "/v1/channels",
        key: w.keys.alicePersonal,
        body: {
          type: "ntfy",
          name: "alice phone",
          settings: {
            topic_url: "https://ntfy.invalid/alice-phone",
            token: "tk_alicephone0123456789",
            priority: 5,
          },
        },
      },
      {
        url: "/v1/channels",
        key: w.keys.aliceOrgA,
        body: {
          type: "webhook",
          name: "org A receiver",
          settings: { url: "https://hooks.example.com/org-a/channel" },
        },
      },
      {
        url: "/v1/channels",
        key: w.keys.bobOrgB,
        body: { type: "email", name: "org B on-call", settings: { addresses: ["oncall@b.example"] } },
      },
    ],
  },
  "GET /v1/channels": {
    ok: (w) => [
      { url: "/v1/channels", key: w.keys.alicePersonal, rows: "channels" },
      { url: "/v1/channels", key: w.keys.carolPersonal, rows: "channels" },
    ],
  },
  "GET /v1/channels/:id": {
    ok: (w) => [{ url: channelPath(seededChannels(w).alice), key: w.keys.alicePersonal }],
    hidden: hiddenOf(channelPath, (c) => c.carol),
  },
  "PUT /v1/channels/:id": {
    ok: (w) => [
      {
        url: channelPath(seededChannels(w).alice),
        key: w.keys.alicePersonal,
        body: { name: "alice ntfy (renamed)", settings: { priority: 5 } },
      },
    ],
    hidden: hiddenOf(channelPath, (c) => c.carol, { name: "renamed" }),
  },
  "DELETE /v1/channels/:id": {
    ok: (w) => [{ url: channelPath(seededChannels(w).aliceSpare), key: w.keys.alicePersonal }],
    hidden: hiddenOf(channelPath, (c) => c.carol),
  },
  "POST /v1/channels/:id/test": {
    // ntfy.invalid never resolves: the provider cannot be reached, a documented 503
    ok: (w) => [
      { url: `${channelPath(seededChannels(w).alice)}/test`, key: w.keys.alicePersonal, status: 503 },
    ],
    hidden: hiddenOf(
      (id) => `${channelPath(id)}/test`,
      (c) => c.carol,
    ),
  },
  "POST /v1/routing-rules": {
    ok: (w) => [
      {
        url: "/v1/routing-rules",
        key: w.keys.alicePersonal,
        body: { channel_ids: [seededChannels(w).alice] },
      },
      {
        url: "/v1/routing-rules",
        key: w.keys.alicePersonal,
        body: {
          channel_ids: [seededChannels(w).alice],
          kinds: ["failure", "missed_heartbeat"],
          connection_ids: [w.conns.PA],
          send_recoveries: false,
          escalate_after_minutes: 15,
          repeat_every_minutes: 30,
          escalation_channel_ids: [seededChannels(w).alice],
        },
      },
    ],
  },
  "GET /v1/routing-rules": {
    ok: (w) => [
      { url: "/v1/routing-rules", key: w.keys.alicePersonal, rows: "routing_rules" },
      { url: "/v1/routing-rules", key: w.keys.carolPersonal, rows: "routing_rules" },
    ],
  },
  "GET /v1/routing-rules/:id": {
    ok: (w) => [{ url: rulePath(seededChannels(w).aliceRule), key: w.keys.alicePersonal }],
    hidden: hiddenOf(rulePath, (c) => c.carolRule),
  },
  "PUT /v1/routing-rules/:id": {
    ok: (w) => [
      { url: rulePath(seededChannels(w).aliceRule), key: w.keys.alicePersonal, body: ruleUpdate(w) },
    ],
    hidden: (w) => hiddenOf(rulePath, (c) => c.carolRule, ruleUpdate(w))(w),
  },
  "DELETE /v1/routing-rules/:id": {
    ok: (w) => [{ url: rulePath(seededChannels(w).aliceRule), key: w.keys.alicePersonal }],
    hidden: hiddenOf(rulePath, (c) => c.carolRule),
  },
  "GET /v1/notification-settings": {
    ok: (w) => [
      { url: "/v1/notification-settings", key: w.keys.alicePersonal },
      { url: "/v1/notification-settings", key: w.keys.bobOrgB },
    ],
  },
  "PUT /v1/notification-settings": {
    ok: (w) => [
      { url: "/v1/notification-settings", key: w.keys.alicePersonal, body: { email_owners: true } },
      { url: "/v1/notification-settings", key: w.keys.bobOrgB, body: { email_owners: false } },
    ],
  },
};

/** The world's maintenance windows; seedRouteWorld makes them. */
const seededWindows = (w: RouteWorld) => {
  if (!w.maintenance)
    throw new Error("this world has no seeded maintenance windows (seedRouteWorld makes them)");
  return w.maintenance;
};

/**
 * Maintenance windows (docs/maintenance.md): those of the key's accounts; another account's is
 * not found.
 */
const maintenanceSamples: Record<string, RouteSample> = {
  "POST /v1/maintenance-windows": {
    ok: (w) => [
      {
        url: "/v1/maintenance-windows",
        key: w.keys.alicePersonal,
        body: {
          connection_ids: [w.conns.PA],
          starts_at: new Date(Date.now() - 60_000).toISOString(),
          ends_at: new Date(Date.now() + 3_600_000).toISOString(),
        },
      },
      {
        url: "/v1/maintenance-windows",
        key: w.keys.aliceOrgA,
        body: {
          organization_id: w.orgs.orgA.id,
          rrule: "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0",
          duration_minutes: 120,
          timezone: "America/New_York",
        },
      },
    ],
  },
  "GET /v1/maintenance-windows": {
    ok: (w) => [
      { url: "/v1/maintenance-windows", key: w.keys.alicePersonal, rows: "maintenance_windows" },
      { url: "/v1/maintenance-windows", key: w.keys.carolPersonal, rows: "maintenance_windows" },
    ],
  },
  "GET /v1/maintenance-windows/:id": {
    ok: (w) => [{ url: `/v1/maintenance-windows/${seededWindows(w).alice}`, key: w.keys.alicePersonal }],
    hidden: (w) => [
      { url: `/v1/maintenance-windows/${seededWindows(w).carol}`, key: w.keys.alicePersonal },
      { url: "/v1/maintenance-windows/00000000-0000-4000-8000-000000000000", key: w.keys.alicePersonal },
    ],
  },
  "DELETE /v1/maintenance-windows/:id": {
    ok: (w) => [{ url: `/v1/maintenance-windows/${seededWindows(w).aliceSpare}`, key: w.keys.alicePersonal }],
    hidden: (w) => [
      { url: `/v1/maintenance-windows/${seededWindows(w).carol}`, key: w.keys.alicePersonal },
      { url: "/v1/maintenance-windows/00000000-0000-4000-8000-000000000000", key: w.keys.alicePersonal },
    ],
  },
};

/** The world's status pages; seedRouteWorld makes them. */
const seededPages = (w: RouteWorld): SeededStatusPages => {
  if (!w.statusPages) throw new Error("this world has no seeded status pages (seedRouteWorld makes them)");
  return w.statusPages;
};

const ABSENT_ID = "00000000-0000-4000-8000-000000000000";
/** A 1×1 PNG, as a logo. */
const PNG_LOGO =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const pagePath = (id: string) => `/v1/status-pages/${id}`;
const postPath = (page: string, post: string) => `${pagePath(page)}/incidents/${post}`;
const pageBody = (slug: string, connectionId: string, more: Record<string, unknown> = {}) => ({
  slug,
  title: `${slug} status`,
  groups: [{ name: "Services", components: [{ connection_id: connectionId, display_name: "Service" }] }],
  ...more,
});
const postBody = { title: "Slow runs", status: "identified", message: "A queue is backed up." };
const updateBody = { status: "resolved", message: "Drained." };
/** Carol's page and an absent one, as alice: both 404. */
const hiddenPage =
  (path: (page: string) => string, body?: unknown) =>
  (w: RouteWorld): SampleRequest[] => [
    { url: path(seededPages(w).carol), key: w.keys.alicePersonal, body },
    { url: path(ABSENT_ID), key: w.keys.alicePersonal, body },
  ];
/** Carol's post on her page, carol's post on alice's page, and absent ones, as alice: all 404. */
const hiddenPost =
  (suffix = "", body?: unknown) =>
  (w: RouteWorld): SampleRequest[] => {
    const p = seededPages(w);
    return [
      { url: `${postPath(p.carol, p.carolPost)}${suffix}`, key: w.keys.alicePersonal, body },
      { url: `${postPath(p.alice, p.carolPost)}${suffix}`, key: w.keys.alicePersonal, body },
      { url: `${postPath(p.alice, ABSENT_ID)}${suffix}`, key: w.keys.alicePersonal, body },
      { url: `${postPath(ABSENT_ID, ABSENT_ID)}${suffix}`, key: w.keys.alicePersonal, body },
    ];
  };

/**
 * Status pages (docs/status-pages.md): those of the key's accounts; another account's page, and
 * a post of another page, are not found. Creating one names connections in its groups.
 */
const statusPageSamples: Record<string, RouteSample> = {
  "POST /v1/status-pages": {
    ok: (w) => [
      {
        url: "/v1/status-pages",
        key: w.keys.alicePersonal,
        body: pageBody("alice-new", w.conns.PA, {
          description: "What our customers rely on.",
          show_response_times: true,
          custom_domain: "status.alice.example",
          logo: PNG_LOGO,
        }),
      },
      {
        url: "/v1/status-pages",
        key: w.keys.aliceOrgA,
        body: pageBody("org-a-new", w.conns.OA, { organization_id: w.orgs.orgA.id }),
      },
    ],
    naming: (w, id) => ({
      url: "/v1/status-pages",
      key: w.keys.alicePersonal,
      body: pageBody("alice-named", id),
    }),
  },
  "GET /v1/status-pages": {
    ok: (w) => [
      { url: "/v1/status-pages", key: w.keys.alicePersonal, rows: "status_pages" },
      { url: "/v1/status-pages", key: w.keys.carolPersonal, rows: "status_pages" },
    ],
  },
  "GET /v1/status-pages/:id": {
    ok: (w) => [{ url: pagePath(seededPages(w).alice), key: w.keys.alicePersonal, rows: "groups" }],
    hidden: hiddenPage(pagePath),
  },
  "PUT /v1/status-pages/:id": {
    ok: (w) => [
      {
        url: pagePath(seededPages(w).alice),
        key: w.keys.alicePersonal,
        body: pageBody("alice-page", w.conns.PA, { title: "Alice (renamed)", show_response_times: true }),
        rows: "groups",
      },
    ],
    hidden: (w) => hiddenPage(pagePath, pageBody("alice-page", w.conns.PA))(w),
  },
  "DELETE /v1/status-pages/:id": {
    ok: (w) => [{ url: pagePath(seededPages(w).aliceSpare), key: w.keys.alicePersonal }],
    hidden: hiddenPage(pagePath),
  },
  "POST /v1/status-pages/:id/incidents": {
    ok: (w) => [
      { url: `${pagePath(seededPages(w).alice)}/incidents`, key: w.keys.alicePersonal, body: postBody },
    ],
    hidden: hiddenPage((id) => `${pagePath(id)}/incidents`, postBody),
  },
  "GET /v1/status-pages/:id/incidents": {
    ok: (w) => [
      { url: `${pagePath(seededPages(w).alice)}/incidents`, key: w.keys.alicePersonal, rows: "incidents" },
      { url: `${pagePath(seededPages(w).carol)}/incidents`, key: w.keys.carolPersonal, rows: "incidents" },
    ],
    hidden: hiddenPage((id) => `${pagePath(id)}/incidents`),
  },
  "GET /v1/status-pages/:id/incidents/:incident_id": {
    ok: (w) => [
      {
        url: postPath(seededPages(w).alice, seededPages(w).alicePost),
        key: w.keys.alicePersonal,
        rows: "updates",
      },
    ],
    hidden: hiddenPost(),
  },
  "POST /v1/status-pages/:id/incidents/:incident_id/updates": {
    ok: (w) => [
      {
        url: `${postPath(seededPages(w).alice, seededPages(w).alicePost)}/updates`,
        key: w.keys.alicePersonal,
        body: updateBody,
        rows: "updates",
      },
    ],
    hidden: hiddenPost("/updates", updateBody),
  },
  "DELETE /v1/status-pages/:id/incidents/:incident_id": {
    ok: (w) => [
      { url: postPath(seededPages(w).alice, seededPages(w).aliceSparePost), key: w.keys.alicePersonal },
    ],
    hidden: hiddenPost(),
  },
};

export const routeSamples: Record<string, RouteSample> = {
  "GET /healthz": { ok: () => [{ url: "/healthz", key: null }] },
  "GET /readyz": { ok: () => [{ url: "/readyz", key: null }] },

  "GET /v1/connections": {
    ok: (w) => [
      { url: "/v1/connections", key: w.keys.alicePersonal, rows: "connections" },
      { url: "/v1/connections?service_type=workflow_b&limit=1", key: w.keys.aliceOrgA, rows: "connections" },
    ],
  },
  "POST /v1/connections": {
    ok: (w) => [
      {
        url: "/v1/connections",
        key: w.keys.alicePersonal,
        body: { service_type: "gateway", service_name: "new gateway" },
      },
      {
        url: "/v1/connections",
        key: w.keys.alicePersonal,
        body: {
          service_type: "workflow_a",
          service_name: "new n8n",
          base_url: "http://127.0.0.1:9",
          api_key: "secret-new-key",
          configuration: { team: "ops" },
        },
      },
    ],
  },
  "GET /v1/connections/:id": {
    ok: (w) => [
      { url: `/v1/connections/${w.conns.PA}`, key: w.keys.alicePersonal },
      { url: `/v1/connections/${w.conns.OA}`, key: w.keys.alicePersonal },
    ],
    naming: (w, id) => ({ url: `/v1/connections/${id}`, key: w.keys.alicePersonal }),
  },
  "PUT /v1/connections/:id": {
    ok: (w) => [
      { url: `/v1/connections/${w.conns.PA}`, key: w.keys.alicePersonal, body: { service_name: "renamed" } },
    ],
    naming: (w, id) => ({
      url: `/v1/connections/${id}`,
      key: w.keys.alicePersonal,
      body: { service_name: "renamed" },
    }),
  },
  "DELETE /v1/connections/:id": {
    ok: (w) => [{ url: `/v1/connections/${w.throwaway}`, key: w.keys.alicePersonal }],
    naming: (w, id) => ({ url: `/v1/connections/${id}`, key: w.keys.alicePersonal }),
  },

  "POST /v1/usage": {
    ok: (w) => [
      { url: "/v1/usage", key: w.keys.alicePersonal, body: sampleUsage(w.conns.PA)[0], rows: "usage" },
      { url: "/v1/usage", key: w.keys.alicePersonal, body: sampleUsage(w.conns.OA), rows: "usage" },
    ],
    naming: (w, id) => ({ url: "/v1/usage", key: w.keys.alicePersonal, body: sampleUsage(id)[0] }),
  },
  "GET /v1/usage": {
    ok: (w) => [
      { url: "/v1/usage", key: w.keys.alicePersonal, rows: "usage_data" },
      {
        url: q("/v1/usage", { connection_id: w.conns.PA, limit: "1" }),
        key: w.keys.alicePersonal,
        rows: "usage_data",
      },
    ],
    naming: (w, id) => ({ url: q("/v1/usage", { connection_id: id }), key: w.keys.alicePersonal }),
  },
  "PUT /v1/usage": {
    ok: (w) => [
      // bob's gateway: heartbeat totals (`gateway` not null) and an unpriced model
      {
        url: q("/v1/usage", { connection_id: w.conns.OB }),
        key: w.keys.bobPersonal,
        rows: "gateway.by_model",
      },
      // alice's workflow: entries by entity and unit
      { url: q("/v1/usage", { connection_id: w.conns.PA }), key: w.keys.alicePersonal, rows: "by_entity" },
      { url: q("/v1/usage", { connection_id: w.conns.PA, workflow_id: "wf1" }), key: w.keys.alicePersonal },
    ],
    naming: (w, id) => ({ url: q("/v1/usage", { connection_id: id }), key: w.keys.alicePersonal }),
  },
  "PUT /v1/connections/:id/budget": {
    ok: (w) => [
      {
        url: `/v1/connections/${w.conns.PA}/budget`,
        key: w.keys.alicePersonal,
        body: { monthly_budget_usd: 250 },
      },
      {
        url: `/v1/connections/${w.conns.OA}/budget`,
        key: w.keys.aliceOrgA,
        body: { monthly_budget_usd: null },
      },
    ],
    naming: (w, id) => ({
      url: `/v1/connections/${id}/budget`,
      key: w.keys.alicePersonal,
      body: { monthly_budget_usd: 250 },
    }),
  },
  "GET /v1/connections/:id/budget": {
    ok: (w) => [{ url: `/v1/connections/${w.conns.PA}/budget`, key: w.keys.alicePersonal }],
    naming: (w, id) => ({ url: `/v1/connections/${id}/budget`, key: w.keys.alicePersonal }),
  },
  "PUT /v1/connections/:id/slo": {
    ok: (w) => [
      {
        url: `/v1/connections/${w.conns.PA}/slo`,
        key: w.keys.alicePersonal,
        body: { objective: 0.999, window_days: 30 },
      },
      {
        url: `/v1/connections/${w.conns.OA}/slo`,
        key: w.keys.aliceOrgA,
        body: { objective: 0.99, window_days: 28 },
      },
    ],
    naming: (w, id) => ({
      url: `/v1/connections/${id}/slo`,
      key: w.keys.alicePersonal,
      body: { objective: 0.999, window_days: 30 },
    }),
  },
  "GET /v1/connections/:id/slo": {
    ok: (w) => [{ url: `/v1/connections/${w.conns.PA}/slo`, key: w.keys.alicePersonal }],
    naming: (w, id) => ({ url: `/v1/connections/${id}/slo`, key: w.keys.alicePersonal }),
  },
  "DELETE /v1/connections/:id/slo": {
    ok: (w) => [{ url: `/v1/connections/${w.conns.OA}/slo`, key: w.keys.aliceOrgA }],
    naming: (w, id) => ({ url: `/v1/connections/${id}/slo`, key: w.keys.alicePersonal }),
  },
  "PUT /v1/budget": {
    ok: (w) => [
      { url: "/v1/budget", key: w.keys.alicePersonal, body: { monthly_budget_usd: 1000 } },
      { url: "/v1/budget", key: w.keys.bobOrgB, body: { monthly_budget_usd: 99.5 } },
    ],
  },
  "GET /v1/budget": {
    ok: (w) => [
      { url: "/v1/budget", key: w.keys.alicePersonal },
      { url: "/v1/budget", key: w.keys.bobOrgB },
    ],
  },
  "POST /v1/gateway/ingest": {
    ok: (w) => [
      {
        url: "/v1/gateway/ingest",
        key: w.keys.ingest,
        body: { type: "heartbeat", gateway: { status: "healthy", latencyMs: 7, version: "2.4.1" } },
      },
    ],
  },

  "GET /v1/availability": readSample("/v1/availability"),
  "GET /v1/availability/summary": readSample("/v1/availability/summary", { window: "day" }, false),
  "GET /v1/executions": {
    ok: (w) => [
      ...readSample("/v1/executions").ok(w),
      {
        url: "/v1/executions?include_error_details=true&status=error",
        key: w.keys.alicePersonal,
        rows: "data",
      },
      { url: "/v1/executions?group_by=workflow", key: w.keys.alicePersonal, rows: "data" },
    ],
    naming: readSample("/v1/executions").naming,
  },
  "GET /v1/analytics": {
    ok: (w) => [
      ...readSample("/v1/analytics", { metric_type: "daily_executions" }).ok(w),
      { url: "/v1/analytics?metric_type=monthly_gateway_cost", key: w.keys.bobPersonal, rows: "data" },
      { url: "/v1/analytics?metric_type=weekly_availability", key: w.keys.alicePersonal, rows: "data" },
    ],
    naming: readSample("/v1/analytics", { metric_type: "daily_executions" }).naming,
  },
  "GET /v1/incidents": {
    ok: (w) => [
      ...readSample("/v1/incidents").ok(w),
      { url: "/v1/incidents?status=acknowledged&kind=availability", key: w.keys.alicePersonal, rows: "data" },
    ],
    naming: readSample("/v1/incidents").naming,
  },
  // incident routes name a connection through the incident: its incident, or an absent id
  "GET /v1/incidents/:id": {
    ok: (w) => [
      { url: `/v1/incidents/${w.incidents[w.conns.PA]}`, key: w.keys.alicePersonal, rows: "events" },
    ],
    naming: (w, id) => ({ url: `/v1/incidents/${w.incidents[id] ?? id}`, key: w.keys.alicePersonal }),
  },
  "POST /v1/incidents/:id/acknowledge": {
    ok: (w) => [
      {
        url: `/v1/incidents/${w.incidents[w.conns.PA]}/acknowledge`,
        key: w.keys.alicePersonal,
        body: { note: "on it" },
        rows: "events",
      },
    ],
    naming: (w, id) => ({
      url: `/v1/incidents/${w.incidents[id] ?? id}/acknowledge`,
      key: w.keys.alicePersonal,
      body: { note: "on it" },
    }),
  },
  "GET /v1/alerts": {
    ok: (w) => [
      { url: "/v1/alerts", key: w.keys.alicePersonal, rows: "data" },
      { url: "/v1/alerts?kind=audit&limit=1", key: w.keys.aliceOrgA, rows: "data" },
      { url: q("/v1/alerts", { connection_id: w.conns.PA }), key: w.keys.alicePersonal },
    ],
    naming: (w, id) => ({ url: q("/v1/alerts", { connection_id: id }), key: w.keys.alicePersonal }),
  },
  "GET /v1/anomalies": readSample("/v1/anomalies"),

  // webhooks (docs/webhooks.md): the key's account's own; another account's is not found
  "POST /v1/webhooks": {
    ok: (w) => [
      {
        url: "/v1/webhooks",
        key: w.keys.alicePersonal,
        body: { url: "https://hooks.example.com/services/alice-2" },
      },
      {
        url: "/v1/webhooks",
        key: w.keys.aliceOrgA,
        body: { url: "https://hooks.example.com/services/org-a" },
      },
    ],
  },
  "GET /v1/webhooks": {
    ok: (w) => [
      { url: "/v1/webhooks", key: w.keys.alicePersonal, rows: "webhooks" },
      { url: "/v1/webhooks", key: w.keys.carolPersonal, rows: "webhooks" },
    ],
  },
  "DELETE /v1/webhooks/:id": {
    ok: (w) => [{ url: `/v1/webhooks/${w.webhooks.alice}`, key: w.keys.alicePersonal }],
    hidden: (w) => [
      { url: `/v1/webhooks/${w.webhooks.carol}`, key: w.keys.alicePersonal },
      { url: "/v1/webhooks/00000000-0000-4000-8000-000000000000", key: w.keys.alicePersonal },
    ],
  },
  ...channelSamples,
  ...maintenanceSamples,
  ...statusPageSamples,
};

/** The value at a dot-separated path of a JSON body. */
export function at(body: unknown, path: string): unknown {
  return path
    .split(".")
    .reduce<unknown>(
      (v, k) => (v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined),
      body,
    );
}
