import { makeBadge } from "badge-maker";
import type {
  BadgeKind,
  ComponentState,
  Indicator,
  PublicComponent,
  PublicSnapshot,
} from "../public-model.js";
import { xmlSafe } from "./escape.js";
import { int, percentText, STATE_WORDS } from "./words.js";

/**
 * A component's badges, drawn by Shields' own library (badge-maker: the same SVG and text widths
 * as shields.io), and the same facts as a Shields endpoint body
 * (https://shields.io/badges/endpoint-badge) for `https://img.shields.io/endpoint?url=…`.
 * badge-maker escapes the label and message for XML; xmlSafe removes what XML cannot carry at all.
 */

/** How long shields.io may keep an endpoint's answer (its floor is 300 s). */
export const BADGE_CACHE_SECONDS = 300;

export interface ShieldsEndpoint {
  schemaVersion: 1;
  label: string;
  message: string;
  color: string;
  cacheSeconds: number;
}

export interface Badge {
  svg: string;
  shields: ShieldsEndpoint;
}

const STATE_COLORS: Record<ComponentState, string> = {
  operational: "brightgreen",
  degraded_performance: "yellow",
  partial_outage: "orange",
  major_outage: "red",
  under_maintenance: "blue",
  unknown: "lightgrey",
};

const INDICATOR_COLORS: Record<Indicator, string> = {
  none: "brightgreen",
  minor: "yellow",
  major: "orange",
  critical: "red",
  maintenance: "blue",
};

const UPTIME_LABELS = {
  "uptime-24h": ["uptime 24h", "24h"],
  "uptime-7d": ["uptime 7d", "7d"],
  "uptime-30d": ["uptime 30d", "30d"],
  "uptime-90d": ["uptime 90d", "90d"],
} as const;

const uptimeColor = (p: number | null): string =>
  p === null ? "lightgrey" : p >= 99.9 ? "brightgreen" : p >= 99 ? "yellow" : p >= 95 ? "orange" : "red";

const responseColor = (ms: number | null): string =>
  ms === null ? "lightgrey" : ms < 500 ? "brightgreen" : ms < 1000 ? "yellow" : "orange";

function badge(label: string, message: string, color: string): Badge {
  const safe = { label: xmlSafe(label), message: xmlSafe(message) };
  return {
    svg: makeBadge({ ...safe, color }),
    shields: { schemaVersion: 1, ...safe, color, cacheSeconds: BADGE_CACHE_SECONDS },
  };
}

/**
 * A component's badge of `kind`: `status` (its display name and state), `uptime-*` (percent, or
 * "no data"), `response-time` (the 24 h mean); null for `response-time` when the page hides
 * response times (the route answers 404).
 */
export function componentBadge(
  c: PublicComponent,
  kind: BadgeKind,
  showResponseTimes: boolean,
): Badge | null {
  switch (kind) {
    case "status":
      return badge(c.name, STATE_WORDS[c.state], STATE_COLORS[c.state]);
    case "response-time": {
      if (!showResponseTimes) return null;
      const ms = c.responseMs;
      return badge("response time", ms === null ? "no data" : `${int(ms)} ms`, responseColor(ms));
    }
    default: {
      const [label, span] = UPTIME_LABELS[kind];
      const p = c.uptime[span];
      return badge(label, p === null ? "no data" : percentText(p), uptimeColor(p));
    }
  }
}

/** The page's overall status: label "status", the overall description as message. */
export function pageBadge(s: PublicSnapshot): Badge {
  return badge("status", s.overall.description, INDICATOR_COLORS[s.overall.indicator]);
}
