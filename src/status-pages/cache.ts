import { createHash } from "node:crypto";
import { brotliCompressSync, constants as zlib, gzipSync } from "node:zlib";
import type { AppContext } from "../core/context.js";
import type { PublicSnapshot } from "./public-model.js";
import { selectFingerprint, selectLogo, selectPublicNames, selectPublicPage } from "./repository.js";
import { buildSnapshot } from "./snapshot.js";

/**
 * The public side's cache (issue #34, "built for traffic"): a status page is what everyone opens
 * during an outage, so a visitor never costs a store query. Each process keeps, per page, the
 * snapshot last built (snapshot.ts) and every representation rendered from it (the HTML page by
 * door, the feed, summary.json, each badge), each with its ETag and gzip and brotli forms.
 *
 * Freshness: at most every {@link CHECK_MS} a request starts, in the background, one cheap
 * statement comparing the page's fingerprint (its updated_at, which every change of the page or
 * its posts moves; its components' connection statuses; their unresolved incidents). A changed
 * fingerprint, a maintenance window starting or ending, or {@link REBUILD_MS} since the last
 * build (today's uptime moves with every check) rebuilds the snapshot; visitors meanwhile get the
 * previous one. A change made through this process (a post, an edit) drops its snapshots at once
 * (`forgetStatusPage`), so the next visitor waits for the new one; another process of a fleet
 * sees it within CHECK_MS. Which slugs exist is a map reloaded every 30 s (at once after a change
 * here, and every 2 s at most while visitors ask for slugs not in it, which wait for that
 * reload), so made-up slugs cost no statement each. While a store is down the last good snapshot keeps being served,
 * marked stale; a page never built (a cold process) answers 503.
 */

/** How often a page's fingerprint is compared with the stores. */
export const CHECK_MS = 5_000;
/** The longest a snapshot is served before it is rebuilt anyway. */
export const REBUILD_MS = 60_000;
/**
 * A slug not in the map of pages reloads the map at most this often: unknown slugs, however many
 * and however varied, cost one statement per interval in all.
 */
const UNKNOWN_RELOAD_MS = 2_000;
const SLUG = /^[a-z0-9][a-z0-9-]{1,48}[a-z0-9]$/;
/** How often the map of slugs and custom domains is reloaded. */
const DOMAINS_MS = 30_000;
/** Bodies below this are not compressed. */
const COMPRESS_MIN = 1024;

/** One representation, ready to send. */
export interface Rendered {
  body: Buffer;
  gzip: Buffer | null;
  br: Buffer | null;
  etag: string;
  type: string;
  status: number;
}

interface Entry {
  slug: string;
  pageId: string;
  fingerprint: string;
  snapshot: PublicSnapshot;
  builtAt: number;
  checkedAt: number;
  /** The next maintenance start or end after the build: the state changes then. */
  boundary: number;
  /** The last refresh failed (a store is down): served as it is, marked stale. */
  stale: boolean;
  renders: Map<string, Rendered | null>;
  refreshing: Promise<Entry | null> | null;
}

interface State {
  entries: Map<string, Entry>;
  /** Slugs being built for their first visitor. */
  building: Map<string, Promise<Entry | null>>;
  /** Every page's slug, once loaded (`namesLoaded`). */
  slugs: Set<string>;
  namesLoaded: boolean;
  /** A reload of the map waiting for UNKNOWN_RELOAD_MS to pass (reloadSoon). */
  reloadScheduled: Promise<void> | null;
  domains: Map<string, string>;
  domainsAt: number;
  domainsLoading: Promise<void> | null;
  /** Bumped by forgetStatusPage: a build started before it is not kept. */
  generation: number;
  warnedAt: number;
}

const states = new WeakMap<AppContext, State>();

function stateOf(ctx: AppContext): State {
  let s = states.get(ctx);
  if (!s) {
    s = {
      entries: new Map(),
      building: new Map(),
      slugs: new Set(),
      namesLoaded: false,
      reloadScheduled: null,
      domains: new Map(),
      domainsAt: 0,
      domainsLoading: null,
      generation: 0,
      warnedAt: 0,
    };
    states.set(ctx, s);
  }
  return s;
}

/**
 * A page, its posts or its components changed through this process: every snapshot of this
 * process is rebuilt before it is served again, unknown slugs and the domain map are forgotten.
 */
export async function forgetStatusPage(ctx: AppContext): Promise<void> {
  const s = stateOf(ctx);
  s.generation++;
  for (const e of s.entries.values()) e.checkedAt = -Infinity;
  s.building.clear();
  // a load already under way may have read before the change
  s.domainsLoading = null;
  await loadDomains(ctx);
}

const fingerprint = (ctx: AppContext, slug: string) => selectFingerprint(ctx.stores.db, slug);

function boundaryOf(s: PublicSnapshot, now: number): number {
  let next = Infinity;
  for (const m of s.maintenance)
    for (const t of [Date.parse(m.startsAt), Date.parse(m.endsAt)]) if (t > now && t < next) next = t;
  return next;
}

/** Builds a page's entry from the stores; null when there is no such page. */
async function build(ctx: AppContext, slug: string): Promise<Entry | null> {
  const fp = await fingerprint(ctx, slug);
  if (!fp) return null;
  const page = await selectPublicPage(ctx.stores.db, { slug });
  if (!page) return null;
  const snapshot = await buildSnapshot(ctx, page);
  const now = Date.now();
  return {
    slug,
    pageId: page.id,
    fingerprint: fp.fp,
    snapshot,
    builtAt: now,
    checkedAt: now,
    boundary: boundaryOf(snapshot, ctx.now().getTime()),
    stale: false,
    renders: new Map(),
    refreshing: null,
  };
}

function warn(ctx: AppContext, s: State, err: unknown, slug: string) {
  const now = Date.now();
  if (now - s.warnedAt < 10_000) return;
  s.warnedAt = now;
  ctx.log.warn(
    { err: (err as Error).message, slug },
    "status page: could not refresh from the stores; serving the last good snapshot",
  );
}

/** Compares the fingerprint and rebuilds when needed; the entry stays on failure, marked stale. */
function refresh(ctx: AppContext, s: State, e: Entry): Promise<Entry | null> {
  if (e.refreshing) return e.refreshing;
  const generation = s.generation;
  const run = (async (): Promise<Entry | null> => {
    try {
      const now = Date.now();
      const fp = await fingerprint(ctx, e.slug);
      if (!fp) {
        s.entries.delete(e.slug);
        s.slugs.delete(e.slug);
        return null;
      }
      const due =
        fp.fp !== e.fingerprint ||
        fp.id !== e.pageId ||
        now - e.builtAt >= REBUILD_MS ||
        ctx.now().getTime() >= e.boundary;
      if (!due) {
        e.checkedAt = now;
        e.stale = false;
        return e;
      }
      const next = await build(ctx, e.slug);
      if (!next) {
        s.entries.delete(e.slug);
        return null;
      }
      // the logo is read once per logo, not once per build
      const logo = e.snapshot.logo ? e.renders.get(`logo:${e.snapshot.logo}`) : undefined;
      if (logo && next.snapshot.logo === e.snapshot.logo) next.renders.set(`logo:${e.snapshot.logo}`, logo);
      // a change made while this build read may be missing from it: check again next time
      if (generation !== s.generation) next.checkedAt = -Infinity;
      s.entries.set(e.slug, next);
      return next;
    } catch (err) {
      warn(ctx, s, err, e.slug);
      e.stale = true;
      e.checkedAt = Date.now();
      return e;
    } finally {
      e.refreshing = null;
    }
  })();
  e.refreshing = run;
  return run;
}

/**
 * The next reload of the map of slugs, shared by every visitor waiting for one: at once when the
 * last one is UNKNOWN_RELOAD_MS old, else when it will be. Made-up slugs cost one statement per
 * interval in all, and a page made through another process is found within it.
 */
function reloadSoon(ctx: AppContext, s: State): Promise<void> {
  if (s.domainsLoading) return s.domainsLoading;
  if (s.reloadScheduled) return s.reloadScheduled;
  const wait = s.domainsAt + UNKNOWN_RELOAD_MS - Date.now();
  if (wait <= 0) return loadDomains(ctx);
  s.reloadScheduled = new Promise<void>((resolve) => setTimeout(resolve, wait)).then(() => {
    s.reloadScheduled = null;
    return loadDomains(ctx);
  });
  return s.reloadScheduled;
}

/** Thrown when a page was never built and the stores cannot build it now. */
export class SnapshotUnavailable extends Error {}

/**
 * The entry of a page for a visitor: the cached one (refreshed in the background when due, or
 * first when this process changed it), else built for this first visitor (once for concurrent
 * ones). Null for a slug with no page.
 */
export async function entryFor(ctx: AppContext, slug: string): Promise<Entry | null> {
  // a path no page can have costs nothing (slugs are checked by the same rule when stored)
  if (!SLUG.test(slug)) return null;
  const s = stateOf(ctx);
  const e = s.entries.get(slug);
  const now = Date.now();
  if (e) {
    if (e.checkedAt === -Infinity) return (await refresh(ctx, s, e)) ?? null;
    if (now - e.checkedAt >= CHECK_MS) void refresh(ctx, s, e);
    return e;
  }
  if (!s.slugs.has(slug) && s.namesLoaded) {
    // perhaps a page made through another process since the map was read: wait for the next reload
    await reloadSoon(ctx, s);
    if (!s.slugs.has(slug)) return null;
  }
  let pending = s.building.get(slug);
  if (!pending) {
    const generation = s.generation;
    pending = build(ctx, slug).then(
      (built) => {
        if (s.building.get(slug) === pending) s.building.delete(slug);
        if (!built) {
          s.slugs.delete(slug);
          return null;
        }
        if (generation !== s.generation) built.checkedAt = -Infinity;
        s.entries.set(slug, built);
        return built;
      },
      (err: unknown) => {
        if (s.building.get(slug) === pending) s.building.delete(slug);
        warn(ctx, s, err, slug);
        throw new SnapshotUnavailable((err as Error).message);
      },
    );
    s.building.set(slug, pending);
  }
  return pending;
}

const etagOf = (body: Buffer) => `"${createHash("sha1").update(body).digest("base64url").slice(0, 22)}"`;

/** A representation of an entry, rendered once per snapshot (null: the renderer has nothing, a 404). */
export function rendered(
  e: Entry,
  key: string,
  render: (s: PublicSnapshot) => { body: string; type: string; status?: number } | null,
): Rendered | null {
  if (e.renders.has(key)) return e.renders.get(key) ?? null;
  const r = render(e.snapshot);
  let out: Rendered | null = null;
  if (r) {
    const body = Buffer.from(r.body);
    const big = body.length >= COMPRESS_MIN;
    out = {
      body,
      gzip: big ? gzipSync(body, { level: 6 }) : null,
      // quality 5: a 600 KB page in a few ms (quality 9 held the event loop 50 ms), ~gzip -9 size
      br: big ? brotliCompressSync(body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 5 } }) : null,
      etag: etagOf(body),
      type: r.type,
      status: r.status ?? 200,
    };
  }
  // a 404 is not kept: its key comes from the visitor's URL (a made-up badge key or kind)
  if (out) e.renders.set(key, out);
  return out;
}

/** The page slug a Host header names, from the custom-domain map (reloaded in the background). */
export function slugForHost(ctx: AppContext, host: string | undefined): string | undefined {
  const s = stateOf(ctx);
  const now = Date.now();
  if (now - s.domainsAt >= DOMAINS_MS && !s.domainsLoading) void loadDomains(ctx);
  if (s.domains.size === 0 || !host) return undefined;
  const colon = host.lastIndexOf(":");
  const name = (colon > 0 && !host.endsWith("]") ? host.slice(0, colon) : host)
    .toLowerCase()
    .replace(/\.$/, "");
  const slug = s.domains.get(name);
  // never Vigil's own host, even for a row stored before PUBLIC_URL changed to it
  if (slug === undefined || name === new URL(ctx.config.publicUrl).hostname.toLowerCase()) return undefined;
  return slug;
}

/** Loads the custom-domain map now (at start and when stale); a failure keeps the previous map. */
export function loadDomains(ctx: AppContext): Promise<void> {
  const s = stateOf(ctx);
  if (s.domainsLoading) return s.domainsLoading;
  s.domainsAt = Date.now();
  s.domainsLoading = (async () => {
    try {
      if (!ctx.stores.isReady) return;
      const rows = await selectPublicNames(ctx.stores.db);
      s.slugs = new Set(rows.map((r) => r.slug));
      s.domains = new Map(rows.flatMap((r) => (r.custom_domain ? [[r.custom_domain, r.slug] as const] : [])));
      s.namesLoaded = true;
    } catch (err) {
      ctx.log.warn({ err: (err as Error).message }, "status pages: could not load custom domains");
    } finally {
      s.domainsLoading = null;
    }
  })();
  return s.domainsLoading;
}

/** A page's logo, read once per logo and kept with the page's entry. */
export async function logoOf(ctx: AppContext, e: Entry): Promise<Rendered | null> {
  if (!e.snapshot.logo) return null;
  const key = `logo:${e.snapshot.logo}`;
  const have = e.renders.get(key);
  if (have) return have;
  const logo = await selectLogo(ctx.stores.db, e.slug);
  if (!logo) return null;
  const r: Rendered = {
    body: Buffer.from(logo.logo),
    gzip: null,
    br: null,
    etag: `"${logo.logo_hash}"`,
    type: logo.logo_type,
    status: 200,
  };
  e.renders.set(key, r);
  return r;
}

/** Whether the entry's last refresh failed (served stale). */
export const isStale = (e: Entry) => e.stale;
export type { Entry as CacheEntry };
