import { systemActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { availabilityTotals } from "../availability/totals.js";
import { uptimeBars, uptimePercent } from "../availability/uptime-bars.js";
import { maintenanceSpans } from "../maintenance/repository.js";
import { availabilitySamples } from "../stores/series/tables.js";
import { pageUrl } from "./pages.js";
import type {
  ComponentState,
  Indicator,
  PublicComponent,
  PublicDay,
  PublicMaintenance,
  PublicPost,
  PublicSnapshot,
  PublicUptime,
} from "./public-model.js";
import {
  type ComponentRow,
  type PostRow,
  selectComponents,
  selectIncidentTimes,
  selectPosts,
  selectStatuses,
  selectUpdates,
  type StatusPageRow,
  type UpdateRow,
} from "./repository.js";

/**
 * Builds what a public status page shows (public-model.ts) from the stores, in a handful of
 * statements whatever the number of visitors: the page and its components, each connection's
 * status and incidents, the maintenance windows over the next 7 days, the 90-day bars (the
 * dashboard's reads: daily rollups and today's raw samples), the last 24 hours' totals, and the
 * posts. The cache (cache.ts) calls it at most once per page per refresh; visitors never do.
 */

const DAY_MS = 86_400_000;
const BAR_DAYS = 90;
/** Maintenance shown ahead of time. */
const MAINTENANCE_AHEAD_MS = 7 * DAY_MS;
const MAX_OUTAGES = 20;
const MAX_PAST_POSTS = 50;

/** Reads as the system: a page shows its own account's connections, checked by the components query (STILL_OWNED). */
const reader = systemActor("status-pages");

/** Incident kinds a visitor's state reads; anomaly and budget incidents (cost, usage) stay internal. */
const OUTAGE_KINDS = ["availability", "missed_heartbeat"];

const iso = (d: Date | string) => new Date(d).toISOString();

function stateOf(status: string | undefined, open: Set<string>, underMaintenance: boolean): ComponentState {
  if (underMaintenance) return "under_maintenance";
  if (status === "error" || open.has("availability") || open.has("missed_heartbeat")) return "major_outage";
  if (open.has("slo_burn")) return "partial_outage";
  if (status === "active") return "operational";
  return "unknown";
}

/** The overall indicator, as Statuspage words it. */
export function overallOf(
  states: ComponentState[],
  activePosts: number,
): { indicator: Indicator; description: string } {
  const n = (s: ComponentState) => states.filter((x) => x === s).length;
  const major = n("major_outage");
  if (major > 0 && major === states.length) return { indicator: "critical", description: "Major outage" };
  if (major > 0) return { indicator: "major", description: "Partial outage" };
  if (n("partial_outage") > 0) return { indicator: "major", description: "Partial outage" };
  if (n("degraded_performance") > 0) return { indicator: "minor", description: "Degraded performance" };
  if (activePosts > 0) return { indicator: "minor", description: "Incident under investigation" };
  if (n("under_maintenance") > 0) return { indicator: "maintenance", description: "Under maintenance" };
  if (states.length > 0 && n("unknown") === states.length)
    return { indicator: "none", description: "No data yet" };
  return { indicator: "none", description: "All systems operational" };
}

function postsOf(rows: PostRow[], updates: UpdateRow[]): PublicPost[] {
  return rows.map((p) => ({
    id: p.id,
    title: p.title,
    status: p.status,
    createdAt: iso(p.created_at),
    updatedAt: iso(p.updated_at),
    resolvedAt: p.resolved_at ? iso(p.resolved_at) : null,
    updates: updates
      .filter((u) => u.post_id === p.id)
      .map((u) => ({ status: u.status, message: u.message, at: iso(u.created_at) })),
  }));
}

/** The snapshot of one page, read now. */
export async function buildSnapshot(ctx: AppContext, page: StatusPageRow): Promise<PublicSnapshot> {
  const db = ctx.stores.db;
  const now = ctx.now();
  const since90 = new Date(now.getTime() - BAR_DAYS * DAY_MS);
  const components: ComponentRow[] = await selectComponents(db, [page.id]);
  const ids = components.map((c) => c.connection_id);
  const [statuses, incidents, spans, bars, day, posts] = await Promise.all([
    selectStatuses(db, ids),
    selectIncidentTimes(db, ids, [...OUTAGE_KINDS, "slo_burn"], since90),
    maintenanceSpans(db, ids, now, new Date(now.getTime() + MAINTENANCE_AHEAD_MS)),
    uptimeBars(ctx, reader, ids, BAR_DAYS),
    ids.length
      ? availabilityTotals(
          ctx,
          availabilitySamples,
          { column: "connection_id", op: "in", value: ids },
          new Date(now.getTime() - DAY_MS),
          now,
          "all",
        )
      : Promise.resolve([]),
    selectPosts(db, page.id, { since: since90, limit: 100 + MAX_PAST_POSTS }),
  ]);
  const updates = await selectUpdates(
    db,
    posts.map((p) => p.id),
  );
  const statusOf = statuses;
  const openOf = new Map<string, Set<string>>();
  const outagesOf = new Map<string, { startedAt: string; resolvedAt: string | null }[]>();
  for (const i of incidents) {
    if (i.resolved_at === null) {
      const s = openOf.get(i.connection_id) ?? new Set<string>();
      s.add(i.kind);
      openOf.set(i.connection_id, s);
    }
    if (!OUTAGE_KINDS.includes(i.kind)) continue;
    const list = outagesOf.get(i.connection_id) ?? [];
    if (list.length < MAX_OUTAGES)
      list.push({ startedAt: iso(i.opened_at), resolvedAt: i.resolved_at ? iso(i.resolved_at) : null });
    outagesOf.set(i.connection_id, list);
  }
  const last24 = new Map<string, { checks: number; available: number; rsSum: number; rsCount: number }>();
  for (const r of day) {
    const acc = last24.get(r.connection_id) ?? { checks: 0, available: 0, rsSum: 0, rsCount: 0 };
    acc.checks += r.checks;
    acc.available += r.available;
    acc.rsSum += r.response_ms_sum;
    acc.rsCount += r.response_ms_count;
    last24.set(r.connection_id, acc);
  }
  const nowMs = now.getTime();
  const shownComponents: PublicComponent[] = components.map((c) => {
    const bar = bars.get(c.connection_id);
    const days: PublicDay[] = (bar?.cells ?? []).map((cell) => ({
      date: cell.start.toISOString().slice(0, 10),
      checks: cell.checks,
      available: cell.available,
      maintenance: cell.maintenance,
      avgResponseMs: page.show_response_times ? cell.avgResponseMs : null,
    }));
    const lastDays = (n: number) => {
      let checks = 0;
      let up = 0;
      for (const d of days.slice(-n)) {
        checks += d.checks;
        up += d.available;
      }
      return uptimePercent(up, checks);
    };
    const t = last24.get(c.connection_id);
    const uptime: PublicUptime = {
      "24h": t ? uptimePercent(t.available, t.checks) : null,
      "7d": lastDays(7),
      "30d": lastDays(30),
      "90d": lastDays(BAR_DAYS),
    };
    const covering = spans.get(c.connection_id) ?? [];
    const under = covering.some((s) => s.start.getTime() <= nowMs && nowMs < s.end.getTime());
    return {
      key: c.key,
      name: c.display_name,
      group: c.group_name,
      state: stateOf(statusOf.get(c.connection_id), openOf.get(c.connection_id) ?? new Set(), under),
      days,
      uptime,
      responseMs:
        page.show_response_times && t && t.rsCount ? Math.round((t.rsSum / t.rsCount) * 10) / 10 : null,
      outages: outagesOf.get(c.connection_id) ?? [],
    };
  });
  // groups in order (components come sorted by group, then position)
  const groups: PublicSnapshot["groups"] = [];
  let at = -1;
  components.forEach((c, i) => {
    if (c.group_position !== at) {
      groups.push({ name: c.group_name, components: [] });
      at = c.group_position;
    }
    const shownC = shownComponents[i];
    if (shownC) groups[groups.length - 1]?.components.push(shownC);
  });
  // maintenance: one entry per stretch, naming the components it covers
  const stretches = new Map<string, PublicMaintenance>();
  components.forEach((c) => {
    for (const s of spans.get(c.connection_id) ?? []) {
      const k = `${s.start.getTime()}-${s.end.getTime()}`;
      const m = stretches.get(k) ?? {
        startsAt: iso(s.start),
        endsAt: iso(s.end),
        active: s.start.getTime() <= nowMs && nowMs < s.end.getTime(),
        components: [],
      };
      if (!m.components.includes(c.display_name)) m.components.push(c.display_name);
      stretches.set(k, m);
    }
  });
  const all = postsOf(posts, updates);
  const activePosts = all.filter((p) => p.status !== "resolved");
  const pastPosts = all.filter((p) => p.status === "resolved").slice(0, MAX_PAST_POSTS);
  return {
    slug: page.slug,
    title: page.title,
    description: page.description,
    logo: page.logo_hash,
    showResponseTimes: page.show_response_times,
    canonicalUrl: pageUrl(ctx, page),
    overall: overallOf(
      shownComponents.map((c) => c.state),
      activePosts.length,
    ),
    groups,
    activePosts,
    pastPosts,
    maintenance: [...stretches.values()].sort((a, b) => a.startsAt.localeCompare(b.startsAt)),
    generatedAt: now.toISOString(),
  };
}
