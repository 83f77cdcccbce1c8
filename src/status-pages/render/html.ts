import path from "node:path";
import { Eta } from "eta";
import { packageRoot } from "../../lib/paths.js";
import type {
  PublicComponent,
  PublicDay,
  PublicMaintenance,
  PublicPost,
  PublicSnapshot,
} from "../public-model.js";
import { escapeHtml } from "./escape.js";
import { STATUS_PAGE_CSS } from "./style.js";
import { badgePath, feedPath, logoPath, postAnchor, shownBadgeKinds, summaryPath } from "./summary.js";
import {
  durationText,
  int,
  percentText,
  POST_STATUS_WORDS,
  ratioText,
  STATE_WORDS,
  utcDay,
  utcTime,
} from "./words.js";

/**
 * The public status page as one HTML document (views/status/page.eta and its partials), built from
 * a snapshot alone: no script, the stylesheet inline (style.ts), every member-written text
 * escaped by the templates (`<%= %>`); the only HTML put in raw is the uptime bars built here from
 * numbers and dates, with the component's name escaped.
 *
 * `prefix` is the path of the page's door: `/status/{slug}`, or "" on a custom domain; every link
 * on the page is an absolute path under it.
 */

const eta = new Eta({ views: path.join(packageRoot, "views"), autoEscape: true, cache: true });

/** A time as the page shows it: machine-readable and in words. */
interface When {
  iso: string;
  text: string;
}

interface PostView {
  anchor: string;
  title: string;
  status: string;
  statusWord: string;
  /** The day it opened ("Nov 27, 2026"), for the past incidents' headings. */
  day: string;
  updates: { status: string; statusWord: string; at: When; message: string }[];
}

interface ComponentView {
  name: string;
  state: string;
  stateWord: string;
  /** The 90-day bar, HTML built by uptimeBar. */
  bar: string;
  uptime90: string;
  /** "123 ms", or null when the page hides response times or has no data. */
  response: string | null;
  outages: { start: When; end: When | null; duration: string }[];
}

const when = (iso: string, now: string): When => ({ iso, text: utcTime(iso, now) });

/**
 * A cell's colour class, the dashboard's rules (src/dashboard/pages/connections.ts): only checks
 * under maintenance m (blue), no checks none (grey), else >= 99.9% o, >= 99% w, below b.
 */
export function dayClass(d: PublicDay): "o" | "w" | "b" | "m" | "" {
  if (d.checks === 0) return d.maintenance > 0 ? "m" : "";
  if (d.available * 1000 >= d.checks * 999) return "o";
  return d.available * 100 >= d.checks * 99 ? "w" : "b";
}

/** A cell's tooltip, as the dashboard's: `2026-11-20: 99.86% (1,438/1,440)`. */
export function dayTitle(d: PublicDay): string {
  if (d.checks) {
    const maint = d.maintenance ? `, ${int(d.maintenance)} under maintenance` : "";
    return `${d.date}: ${ratioText(d.available, d.checks)}% (${int(d.available)}/${int(d.checks)})${maint}`;
  }
  return d.maintenance ? `${d.date}: maintenance (${int(d.maintenance)} checks)` : `${d.date}: no data`;
}

/** The 90-day bar: one `<i>` a day, oldest first, in an image named by its 90-day uptime. */
function uptimeBar(c: PublicComponent): string {
  const p = c.uptime["90d"];
  const label = `90-day uptime of ${c.name}: ${p === null ? "no data" : percentText(p)}`;
  let html = `<div class="ub" role="img" aria-label="${escapeHtml(label)}">`;
  for (const d of c.days) {
    const k = dayClass(d);
    html += `<i${k ? ` class="${k}"` : ""} title="${escapeHtml(dayTitle(d))}"></i>`;
  }
  return `${html}</div>`;
}

function postView(p: PublicPost, now: string): PostView {
  return {
    anchor: postAnchor(p.id),
    title: p.title,
    status: p.status,
    statusWord: POST_STATUS_WORDS[p.status],
    day: utcDay(p.createdAt),
    updates: p.updates.map((u) => ({
      status: u.status,
      statusWord: POST_STATUS_WORDS[u.status],
      at: when(u.at, now),
      message: u.message,
    })),
  };
}

function componentView(c: PublicComponent, showResponseTimes: boolean, now: string): ComponentView {
  const nowMs = Date.parse(now);
  return {
    name: c.name,
    state: c.state,
    stateWord: STATE_WORDS[c.state],
    bar: uptimeBar(c),
    uptime90: c.uptime["90d"] === null ? "no data" : `${percentText(c.uptime["90d"])} uptime`,
    response: showResponseTimes && c.responseMs !== null ? `${int(c.responseMs)} ms` : null,
    outages: c.outages.map((o) => ({
      start: when(o.startedAt, now),
      end: o.resolvedAt ? when(o.resolvedAt, now) : null,
      duration: durationText((o.resolvedAt ? Date.parse(o.resolvedAt) : nowMs) - Date.parse(o.startedAt)),
    })),
  };
}

const maintenanceView = (m: PublicMaintenance, now: string) => ({
  active: m.active,
  starts: when(m.startsAt, now),
  ends: when(m.endsAt, now),
  components: m.components.join(", "),
});

/** Past posts by the UTC day they opened, newest day first (the posts come newest first). */
function byDay(posts: PostView[]): { day: string; posts: PostView[] }[] {
  const days: { day: string; posts: PostView[] }[] = [];
  for (const p of posts) {
    const last = days.at(-1);
    if (last?.day === p.day) last.posts.push(p);
    else days.push({ day: p.day, posts: [p] });
  }
  return days;
}

/** The page of `s` as a visitor at `{prefix}/` sees it. */
export function renderStatusPage(s: PublicSnapshot, prefix: string): string {
  const now = s.generatedAt;
  const kinds = shownBadgeKinds(s.showResponseTimes);
  return eta.render("./status/page", {
    css: STATUS_PAGE_CSS,
    title: s.title,
    description: s.description,
    canonicalUrl: s.canonicalUrl,
    logo: s.logo === null ? null : logoPath(prefix, s.logo),
    links: { feed: feedPath(prefix), summary: summaryPath(prefix) },
    overall: s.overall,
    activePosts: s.activePosts.map((p) => postView(p, now)),
    pastDays: byDay(s.pastPosts.map((p) => postView(p, now))),
    maintenance: s.maintenance.map((m) => maintenanceView(m, now)),
    groups: s.groups.map((g) => ({
      name: g.name,
      components: g.components.map((c) => componentView(c, s.showResponseTimes, now)),
    })),
    badges: s.groups.flatMap((g) =>
      g.components.map((c) => ({
        name: c.name,
        links: kinds.map((kind) => ({
          kind: kind.replace("-", " "),
          href: badgePath(prefix, c.key, kind, "svg"),
        })),
      })),
    ),
    generated: when(now, now),
  });
}
