/**
 * What a visitor of a public status page may know (issue #34), and nothing more: the shape the
 * snapshot builder (snapshot.ts) fills from the stores and every public rendering (the HTML page,
 * the Atom feed, summary.json, the badges) reads. A connection's real name, URL, credentials and
 * ids are not in it: a component is known by its public key and display name only, and an
 * automatic incident by its times only (never its title or timeline).
 */

/** The status of a public incident post, as Atlassian Statuspage names them. */
export const POST_STATUSES = ["investigating", "identified", "monitoring", "resolved"] as const;
export type PostStatus = (typeof POST_STATUSES)[number];

/**
 * A component's state now, in Statuspage's words (plus `unknown` for a connection never
 * checked or reconfigured since its last check):
 * - `under_maintenance`: a maintenance window covers it now;
 * - `major_outage`: an unresolved availability or missed-heartbeat incident, or status `error`;
 * - `partial_outage`: an unresolved SLO burn-rate incident;
 * - `operational`: otherwise, once checked.
 * Anomaly and budget incidents are internal (cost, usage) and never shown.
 */
export const COMPONENT_STATES = [
  "operational",
  "degraded_performance",
  "partial_outage",
  "major_outage",
  "under_maintenance",
  "unknown",
] as const;
export type ComponentState = (typeof COMPONENT_STATES)[number];

/** The page's overall indicator, as Statuspage's `status.indicator` (plus `maintenance`). */
export type Indicator = "none" | "minor" | "major" | "critical" | "maintenance";

/** One UTC day of a component's 90-day bar. */
export interface PublicDay {
  /** `YYYY-MM-DD`, UTC. */
  date: string;
  /** Checks of the day, those under maintenance left out. */
  checks: number;
  available: number;
  /** Checks under a maintenance window (not in checks or available). */
  maintenance: number;
  /** Mean response time of the day in ms; null without measured checks or when the page hides response times. */
  avgResponseMs: number | null;
}

/** Uptime in percent to 3 decimals over the last 24 h, 7 d, 30 d and 90 d; null without checks. */
export interface PublicUptime {
  "24h": number | null;
  "7d": number | null;
  "30d": number | null;
  "90d": number | null;
}

/** An automatic incident (availability or missed heartbeat) of a component: its times only. */
export interface PublicOutage {
  startedAt: string;
  /** Null while it is unresolved. */
  resolvedAt: string | null;
}

export interface PublicComponent {
  /** Public, stable id of the component on this page (12 lowercase letters and digits), used in badge URLs. */
  key: string;
  /** The display name the page's admins chose. */
  name: string;
  /** The name of its group. */
  group: string;
  state: ComponentState;
  /** The last 90 UTC days, oldest first, today (so far) last. */
  days: PublicDay[];
  uptime: PublicUptime;
  /** Mean response time over the last 24 h in ms; null without data or when the page hides response times. */
  responseMs: number | null;
  /** Automatic incidents over the last 90 days, newest first, at most 20. */
  outages: PublicOutage[];
}

export interface PublicGroup {
  name: string;
  components: PublicComponent[];
}

export interface PublicPostUpdate {
  status: PostStatus;
  /** Plain text as the member wrote it (escaped by every renderer). */
  message: string;
  at: string;
}

/** A public incident post, written by members (never the internal timeline). */
export interface PublicPost {
  id: string;
  title: string;
  /** The latest update's status. */
  status: PostStatus;
  createdAt: string;
  /** The latest update's time. */
  updatedAt: string;
  /** When an update set it resolved; null while it is not. */
  resolvedAt: string | null;
  /** Every update, newest first (the first one carries the post's opening message). */
  updates: PublicPostUpdate[];
}

/** A maintenance window covering components of the page, under way or starting within 7 days. */
export interface PublicMaintenance {
  startsAt: string;
  endsAt: string;
  active: boolean;
  /** Display names of the page's components it covers. */
  components: string[];
}

/** Everything a page shows, built at once and cached (cache.ts). */
export interface PublicSnapshot {
  slug: string;
  title: string;
  description: string | null;
  /** The logo's content hash when the page has one (its URL is `{prefix}/logo?v={logo}`), else null. */
  logo: string | null;
  showResponseTimes: boolean;
  /**
   * Absolute URL of the page for links that leave it (feed, summary.json, badges in a README):
   * `https://{custom_domain}` when one is set, else `{PUBLIC_URL}/status/{slug}`.
   */
  canonicalUrl: string;
  overall: { indicator: Indicator; description: string };
  groups: PublicGroup[];
  /** Posts not resolved, newest first. */
  activePosts: PublicPost[];
  /** Resolved posts of the last 90 days, newest first, at most 50. */
  pastPosts: PublicPost[];
  maintenance: PublicMaintenance[];
  /** When the snapshot was built. */
  generatedAt: string;
}

/** The badge kinds of a component: `/status/{slug}/badge/{key}/{kind}.svg` and `.json` (Shields endpoint). */
export const BADGE_KINDS = [
  "status",
  "uptime-24h",
  "uptime-7d",
  "uptime-30d",
  "uptime-90d",
  "response-time",
] as const;
export type BadgeKind = (typeof BADGE_KINDS)[number];
