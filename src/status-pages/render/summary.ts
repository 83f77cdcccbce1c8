import {
  BADGE_KINDS,
  type BadgeKind,
  type ComponentState,
  type Indicator,
  type PostStatus,
  type PublicSnapshot,
} from "../public-model.js";

/**
 * The page's JSON summary (`{prefix}/summary.json`), modelled on Atlassian Statuspage's
 * `/api/v2/summary.json` so tools that read Statuspage read it too, and the paths every public
 * rendering and the routes share.
 */

/** `{prefix}/badge/{key}/{kind}.{ext}`: an SVG badge, or its Shields endpoint JSON. */
export const badgePath = (prefix: string, key: string, kind: BadgeKind, ext: "svg" | "json"): string =>
  `${prefix}/badge/${encodeURIComponent(key)}/${kind}.${ext}`;
/** `{prefix}/badge.{ext}`: the page's overall status badge (pageBadge). */
export const pageBadgePath = (prefix: string, ext: "svg" | "json"): string => `${prefix}/badge.${ext}`;
export const feedPath = (prefix: string): string => `${prefix}/feed.atom`;
export const summaryPath = (prefix: string): string => `${prefix}/summary.json`;
/** The logo by its content hash, so it can be cached for good. */
export const logoPath = (prefix: string, hash: string): string =>
  `${prefix}/logo?v=${encodeURIComponent(hash)}`;
/** A post's place on the page (its element id is `post-{id}`). */
export const postAnchor = (id: string): string => `post-${encodeURIComponent(id)}`;

/** The badge kinds a page offers: response time only when it shows response times. */
export const shownBadgeKinds = (showResponseTimes: boolean): BadgeKind[] =>
  BADGE_KINDS.filter((k) => showResponseTimes || k !== "response-time");

export interface SummaryComponent {
  id: string;
  name: string;
  status: ComponentState;
  group_name: string;
  uptime: { "24h": number | null; "7d": number | null; "30d": number | null; "90d": number | null };
  /** Only when the page shows response times. */
  response_time_ms?: number | null;
  /** Absolute URLs of the SVG badges by kind, and of their Shields endpoints under `shields`. */
  badges: Partial<Record<BadgeKind, string>> & { shields: Partial<Record<BadgeKind, string>> };
}

export interface SummaryIncident {
  id: string;
  name: string;
  status: PostStatus;
  created_at: string;
  updated_at: string;
  resolved_at: string | null;
  shortlink: string;
  /** Newest first. */
  incident_updates: { status: PostStatus; body: string; created_at: string }[];
}

export interface PublicSummary {
  page: { name: string; url: string; time_zone: "Etc/UTC"; updated_at: string };
  status: { indicator: Indicator; description: string };
  components: SummaryComponent[];
  /** The posts not resolved. */
  incidents: SummaryIncident[];
  scheduled_maintenances: {
    starts_at: string;
    ends_at: string;
    status: "in_progress" | "scheduled";
    components: string[];
  }[];
}

/** The summary of a snapshot (member-written text as it is: JSON carries it, the reader escapes it). */
export function renderSummary(s: PublicSnapshot): PublicSummary {
  const kinds = shownBadgeKinds(s.showResponseTimes);
  return {
    page: { name: s.title, url: s.canonicalUrl, time_zone: "Etc/UTC", updated_at: s.generatedAt },
    status: { indicator: s.overall.indicator, description: s.overall.description },
    components: s.groups.flatMap((g) =>
      g.components.map((c) => {
        const badges: SummaryComponent["badges"] = { shields: {} };
        for (const kind of kinds) {
          badges[kind] = badgePath(s.canonicalUrl, c.key, kind, "svg");
          badges.shields[kind] = badgePath(s.canonicalUrl, c.key, kind, "json");
        }
        return {
          id: c.key,
          name: c.name,
          status: c.state,
          group_name: g.name,
          uptime: { ...c.uptime },
          ...(s.showResponseTimes ? { response_time_ms: c.responseMs } : {}),
          badges,
        };
      }),
    ),
    incidents: s.activePosts.map((p) => ({
      id: p.id,
      name: p.title,
      status: p.status,
      created_at: p.createdAt,
      updated_at: p.updatedAt,
      resolved_at: p.resolvedAt,
      shortlink: `${s.canonicalUrl}#${postAnchor(p.id)}`,
      incident_updates: p.updates.map((u) => ({ status: u.status, body: u.message, created_at: u.at })),
    })),
    scheduled_maintenances: s.maintenance.map((m) => ({
      starts_at: m.startsAt,
      ends_at: m.endsAt,
      status: m.active ? "in_progress" : "scheduled",
      components: [...m.components],
    })),
  };
}
