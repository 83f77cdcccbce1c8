import type { IncomingMessage } from "node:http";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../core/context.js";
import {
  type CacheEntry,
  entryFor,
  isStale,
  loadDomains,
  logoOf,
  rendered,
  type Rendered,
  slugForHost,
  SnapshotUnavailable,
} from "../status-pages/cache.js";
import { BADGE_KINDS, type BadgeKind } from "../status-pages/public-model.js";
import { componentBadge, pageBadge } from "../status-pages/render/badges.js";
import { renderAtomFeed } from "../status-pages/render/feed.js";
import { renderStatusPage } from "../status-pages/render/html.js";
import { STATUS_PAGE_STYLE_HASH } from "../status-pages/render/style.js";
import { renderSummary } from "../status-pages/render/summary.js";

/**
 * The public side of status pages (issue #34): no sign-in, no key, no cookie. Every answer comes
 * from the cache (cache.ts) with an ETag, a short Cache-Control and precompressed bodies, so a
 * visitor costs no store query; a conditional request that matches is a 304.
 *
 * Doors: /status/{slug}… on Vigil's own host, and the same paths without the prefix on a page's
 * custom domain (the Host header; `rewriteStatusHost` below maps them before routing). On a
 * custom domain nothing but the page's public paths answers.
 */

const HTML_CSP = `default-src 'none'; style-src ${STATUS_PAGE_STYLE_HASH}; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
/** A badge or a logo opened on its own runs nothing (an SVG could carry a script). */
const IMAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox";
const PAGE_CACHE = "public, max-age=15, stale-while-revalidate=45, stale-if-error=3600";
const BADGE_CACHE = "public, max-age=60, stale-while-revalidate=300, stale-if-error=86400";

declare module "http" {
  interface IncomingMessage {
    /** Set when the request came on a status page's custom domain (rewriteStatusHost). */
    vigilStatusDomain?: boolean;
  }
}

const PUBLIC_PATHS = /^\/(?:feed\.atom|summary\.json|badge\.svg|badge\.json|logo|badge\/[^/]+\/[^/]+)?$/;

/**
 * Fastify's `rewriteUrl`: a request whose Host is a page's custom domain reads that page's public
 * paths (`/`, `/feed.atom`, `/summary.json`, `/badge/…`, `/logo`) as /status/{slug}/…; any other
 * path there is a 404. Every other request passes untouched, at the cost of one map lookup.
 */
export function rewriteStatusHost(ctx: AppContext, req: IncomingMessage): string {
  const url = req.url ?? "/";
  const slug = slugForHost(ctx, req.headers.host);
  if (slug === undefined) return url;
  req.vigilStatusDomain = true;
  const q = url.indexOf("?");
  const path = q >= 0 ? url.slice(0, q) : url;
  const query = q >= 0 ? url.slice(q) : "";
  if (!PUBLIC_PATHS.test(path)) return "/status/-/not-here";
  return `/status/${slug}${path === "/" ? "" : path}${query}`;
}

/** The ETag of one encoding of a representation: each encoding has its own (RFC 9110 §8.8.3). */
const etagIn = (etag: string, encoding: "br" | "gzip" | null) =>
  encoding ? `${etag.slice(0, -1)}-${encoding}"` : etag;

/** Whether If-None-Match names the representation in any encoding (the content is the same). */
function matches(req: FastifyRequest, etag: string): boolean {
  const inm = req.headers["if-none-match"];
  if (!inm) return false;
  const base = etag.slice(0, -1);
  return inm.split(",").some((t) => {
    const v = t.trim().replace(/^W\//, "");
    return v === etag || v === `${base}-br"` || v === `${base}-gzip"`;
  });
}

/** The codings Accept-Encoding allows (q above 0); `*` allows any not named. */
function accepted(header: string): (coding: string) => boolean {
  const q = new Map<string, number>();
  for (const part of header.split(",")) {
    const [name = "", ...params] = part.trim().toLowerCase().split(";");
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    q.set(name.trim(), qp ? Number(qp.slice(2)) : 1);
  }
  return (c) => (q.get(c) ?? q.get("*") ?? 0) > 0;
}

/** br, else gzip, when the client accepts it and the body was compressed; else none. */
function encodingFor(header: string | undefined, r: Rendered): "br" | "gzip" | null {
  if (!header || (!r.br && !r.gzip)) return null;
  const ok = accepted(header);
  if (r.br && ok("br")) return "br";
  if (r.gzip && ok("gzip")) return "gzip";
  return null;
}

function send(
  req: FastifyRequest,
  reply: FastifyReply,
  r: Rendered,
  cache: string,
  stale: boolean,
  extra: Record<string, string> = {},
) {
  const encoding = encodingFor(req.headers["accept-encoding"], r);
  reply.headers({
    "content-type": r.type,
    "cache-control": cache,
    etag: etagIn(r.etag, encoding),
    vary: "Accept-Encoding",
    "x-content-type-options": "nosniff",
    ...extra,
  });
  if (stale) reply.header("x-vigil-stale", "true");
  if (r.status === 200 && matches(req, r.etag)) return reply.code(304).send();
  reply.code(r.status);
  if (encoding === "br") return reply.header("content-encoding", "br").send(r.br);
  if (encoding === "gzip") return reply.header("content-encoding", "gzip").send(r.gzip);
  return reply.send(r.body);
}

const HTML_HEADERS = {
  "content-security-policy": HTML_CSP,
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

function notFoundPage(reply: FastifyReply, what: string) {
  return reply
    .code(404)
    .headers({
      ...HTML_HEADERS,
      "content-type": "text/html; charset=utf-8",
      "cache-control": "public, max-age=10",
    })
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Not found</title></head><body><main><h1>Not found</h1><p>${what}</p></main></body></html>`,
    );
}

function unavailablePage(reply: FastifyReply) {
  return reply
    .code(503)
    .headers({
      ...HTML_HEADERS,
      "content-type": "text/html; charset=utf-8",
      "cache-control": "no-store",
      "retry-after": "10",
    })
    .send(
      '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Status page unavailable</title></head><body><main><h1>Status page unavailable</h1><p>This status page cannot be read right now. Try again in a few seconds.</p></main></body></html>',
    );
}

/** The entry, or an answer already sent (404, 503). */
async function load(
  ctx: AppContext,
  slug: string,
  reply: FastifyReply,
  json: boolean,
): Promise<CacheEntry | null> {
  try {
    const e = await entryFor(ctx, slug);
    if (e) return e;
    if (json)
      await reply
        .code(404)
        .headers({ "cache-control": "public, max-age=10", "content-type": "application/json; charset=utf-8" })
        .send({ error: { code: "NOT_FOUND", message: `No status page at /status/${slug.slice(0, 60)}.` } });
    else await notFoundPage(reply, "There is no status page here.");
    return null;
  } catch (err) {
    if (!(err instanceof SnapshotUnavailable)) throw err;
    if (json)
      await reply
        .code(503)
        .headers({ "retry-after": "10", "cache-control": "no-store" })
        .send({
          error: {
            code: "SERVICE_UNAVAILABLE",
            message: "The status page cannot be read right now; retry shortly.",
          },
        });
    else await unavailablePage(reply);
    return null;
  }
}

const JSON_TYPE = "application/json; charset=utf-8";
const SVG_TYPE = "image/svg+xml; charset=utf-8";
const CORS = { "access-control-allow-origin": "*" };

/** Registers the public routes; call before the dashboard (whose catch-alls are HTML 404s). */
export async function registerStatusPages(app: FastifyInstance, ctx: AppContext): Promise<void> {
  if (ctx.stores.isReady) await loadDomains(ctx);
  // precompressed here: the compression plugin stays out of these routes
  const opts = { compress: false as const, config: { auth: false as const } };
  const prefixOf = (req: FastifyRequest, slug: string) =>
    req.raw.vigilStatusDomain ? "" : `/status/${slug}`;

  app.get<{ Params: { slug: string } }>("/status/:slug", opts, async (req, reply) => {
    const e = await load(ctx, req.params.slug, reply, false);
    if (!e) return reply;
    const prefix = prefixOf(req, e.slug);
    const r = rendered(e, `html:${prefix}`, (s) => ({
      body: renderStatusPage(s, prefix),
      type: "text/html; charset=utf-8",
    }));
    return send(req, reply, r as Rendered, PAGE_CACHE, isStale(e), HTML_HEADERS);
  });

  app.get<{ Params: { slug: string } }>("/status/:slug/feed.atom", opts, async (req, reply) => {
    const e = await load(ctx, req.params.slug, reply, false);
    if (!e) return reply;
    const r = rendered(e, "feed", (s) => ({
      body: renderAtomFeed(s),
      type: "application/atom+xml; charset=utf-8",
    }));
    return send(req, reply, r as Rendered, PAGE_CACHE, isStale(e), CORS);
  });

  app.get<{ Params: { slug: string } }>("/status/:slug/summary.json", opts, async (req, reply) => {
    const e = await load(ctx, req.params.slug, reply, true);
    if (!e) return reply;
    const r = rendered(e, "summary", (s) => ({ body: JSON.stringify(renderSummary(s)), type: JSON_TYPE }));
    return send(req, reply, r as Rendered, PAGE_CACHE, isStale(e), CORS);
  });

  for (const ext of ["svg", "json"] as const)
    app.get<{ Params: { slug: string } }>(`/status/:slug/badge.${ext}`, opts, async (req, reply) => {
      const e = await load(ctx, req.params.slug, reply, ext === "json");
      if (!e) return reply;
      const r = rendered(e, `page-badge.${ext}`, (s) => {
        const b = pageBadge(s);
        return ext === "svg"
          ? { body: b.svg, type: SVG_TYPE }
          : { body: JSON.stringify(b.shields), type: JSON_TYPE };
      });
      return send(
        req,
        reply,
        r as Rendered,
        BADGE_CACHE,
        isStale(e),
        ext === "svg" ? { "content-security-policy": IMAGE_CSP } : CORS,
      );
    });

  app.get<{ Params: { slug: string; key: string; file: string } }>(
    "/status/:slug/badge/:key/:file",
    opts,
    async (req, reply) => {
      const { key, file } = req.params;
      const dot = file.lastIndexOf(".");
      const kind = file.slice(0, dot) as BadgeKind;
      const ext = file.slice(dot + 1);
      const json = ext === "json";
      const e = await load(ctx, req.params.slug, reply, json);
      if (!e) return reply;
      const r = rendered(e, `badge:${key}:${file}`, (s) => {
        if ((ext !== "svg" && ext !== "json") || !BADGE_KINDS.includes(kind)) return null;
        const c = s.groups.flatMap((g) => g.components).find((x) => x.key === key);
        if (!c) return null;
        const b = componentBadge(c, kind, s.showResponseTimes);
        if (!b) return null;
        return json ? { body: JSON.stringify(b.shields), type: JSON_TYPE } : { body: b.svg, type: SVG_TYPE };
      });
      if (!r) {
        const known = BADGE_KINDS.join(", ");
        return reply
          .code(404)
          .headers({ "cache-control": "public, max-age=10", ...CORS })
          .type(JSON_TYPE)
          .send({
            error: {
              code: "NOT_FOUND",
              message: `No badge ${file.slice(0, 40)} for component ${key.slice(0, 20)} on this page: a badge is /badge/{component key}/{kind}.svg or .json, kind one of ${known} (response-time only where the page shows response times).`,
            },
          });
      }
      return send(
        req,
        reply,
        r,
        BADGE_CACHE,
        isStale(e),
        json ? CORS : { "content-security-policy": IMAGE_CSP },
      );
    },
  );

  // the logo: read from the store when its snapshot says there is one, then cached with the entry
  app.get<{ Params: { slug: string } }>("/status/:slug/logo", opts, async (req, reply) => {
    const e = await load(ctx, req.params.slug, reply, false);
    if (!e) return reply;
    let r: Rendered | null;
    try {
      r = await logoOf(ctx, e);
    } catch {
      return reply
        .code(503)
        .headers({ "retry-after": "10", "cache-control": "no-store" })
        .send({
          error: {
            code: "SERVICE_UNAVAILABLE",
            message: "The logo cannot be read right now; retry shortly.",
          },
        });
    }
    if (!r) return notFoundPage(reply, "This status page has no logo.");
    // the URL carries the logo's hash: a new logo is a new URL, so this one may be kept long
    return send(req, reply, r, "public, max-age=86400", isStale(e), { "content-security-policy": IMAGE_CSP });
  });

  // anything else under /status/ is a page that does not exist (and the custom domains' other paths)
  app.get("/status/*", opts, async (_req, reply) => notFoundPage(reply, "There is no status page here."));
}
