import fs from "node:fs";
import path from "node:path";
import fastifyHelmet from "@fastify/helmet";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../core/context.js";
import { ServiceError } from "../core/errors.js";
import { FORM_BODY_LIMIT, registerBrowserBasics } from "../http/browser.js";
import { packageRoot } from "../lib/paths.js";
import { statusOfError } from "./forms.js";
import { registerAccountPages } from "./pages/accounts.js";
import { registerChannelPages } from "./pages/channels.js";
import { registerConnectionPages } from "./pages/connections.js";
import { registerIncidentPages } from "./pages/incidents.js";
import { registerKeyPages } from "./pages/keys.js";
import { registerMaintenancePages } from "./pages/maintenance.js";
import { registerOrganizationPages } from "./pages/organizations.js";
import { registerStatusPagePages } from "./pages/status-pages.js";
import { registerUsagePages } from "./pages/usage.js";
import { page, type PageFrame } from "./render.js";
import { requireSession } from "./session.js";

/**
 * The web dashboard, served by Vigil itself at `/` (issue #15): server-rendered HTML (Eta
 * templates in `views/`), a stylesheet and a few small scripts of its own plus uPlot from the
 * package (`/assets/…`, never a CDN). The signed-in user of /signin's session is the actor of
 * every page, and every page calls the same core functions REST and MCP do: the dashboard has
 * no permission logic of its own.
 *
 * Security: a strict Content-Security-Policy (scripts, styles, images and connections from this
 * origin only, no inline script or style), frame-ancestors none, no referrer, CSRF tokens on
 * every form (checked before the form's handler), the session cookie HttpOnly, SameSite=Lax and
 * Secure except on http loopback (http/browser.ts).
 */
export async function registerDashboard(app: FastifyInstance, ctx: AppContext): Promise<void> {
  await app.register(async (scope) => {
    await registerBrowserBasics(scope, ctx);
    await scope.register(fastifyHelmet, {
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: ["'none'"],
          scriptSrc: ["'self'"],
          styleSrc: ["'self'"],
          imgSrc: ["'self'", "data:"],
          fontSrc: ["'self'"],
          connectSrc: ["'self'"],
          formAction: ["'self'"],
          frameAncestors: ["'none'"],
          baseUri: ["'none'"],
          objectSrc: ["'none'"],
        },
      },
      referrerPolicy: { policy: "no-referrer" },
      crossOriginEmbedderPolicy: false,
      // HSTS only when served over https (PUBLIC_URL); plain http on loopback is a developer's machine
      strictTransportSecurity: ctx.config.publicUrl.startsWith("https:"),
    });

    registerAssets(scope);

    scope.addHook("preHandler", requireSession(ctx));

    scope.setErrorHandler((err, req, reply) => errorPage(req, reply, err));

    scope.get("/", async (_req, reply) => reply.code(303).header("location", "/connections").send());

    await registerAccountPages(scope, ctx);
    await registerKeyPages(scope, ctx);
    await registerOrganizationPages(scope, ctx);
    await registerConnectionPages(scope, ctx);
    await registerIncidentPages(scope, ctx);
    await registerUsagePages(scope, ctx);
    await registerChannelPages(scope, ctx);
    await registerMaintenancePages(scope, ctx);
    await registerStatusPagePages(scope, ctx);
  });
}

/** The frame of a page: the signed-in user and a CSRF token for its forms. */
export function frameOf(req: FastifyRequest, reply: FastifyReply, notice?: string | null): PageFrame {
  const u = req.dashboardUser;
  return {
    user: u ? { id: u.actor.userId, email: u.email } : null,
    csrf: reply.generateCsrf(),
    notice: notice ?? null,
  };
}

/** Errors of a page: a core error with its REST status and message; CSRF and body errors said plainly. */
function errorPage(req: FastifyRequest, reply: FastifyReply, err: unknown) {
  const e = err as { statusCode?: number; code?: string; message?: string };
  let status = 500;
  let message = "Something went wrong on our side; nothing more is known here. Try again.";
  if (err instanceof ServiceError) {
    status = statusOfError(err);
    message = err.message;
  } else if (e.code?.startsWith("FST_CSRF")) {
    status = 403;
    message =
      "The form expired or came from another site; nothing was changed. Go back, reload the page and try again.";
  } else if (e.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    status = 413;
    message = `The form is larger than ${FORM_BODY_LIMIT / 1024} KiB; nothing was changed. Shorten the fields and try again.`;
  } else if (typeof e.statusCode === "number" && e.statusCode >= 400 && e.statusCode < 500) {
    status = e.statusCode;
    message = e.message ?? "The request could not be read.";
  }
  if (status >= 500) req.log.error({ err }, "dashboard page failed");
  if (status === 503) reply.header("retry-after", 5);
  const frame = (() => {
    try {
      return frameOf(req, reply);
    } catch {
      return { user: null, csrf: "", notice: null };
    }
  })();
  return page(reply, "error", { frame, status, message }, status);
}

/** Where the REST API, the tool server and OAuth live: their 404s stay JSON. */
const API_PATHS = /^\/(v1|mcp|oauth|\.well-known|docs|healthz|readyz|livez)(\/|$)/;

/**
 * The 404 of a page a browser asked for (not under the API's paths, Accept naming text/html): an
 * HTML page in the dashboard's frame with its security headers, instead of the API's JSON body.
 * Answers false when the caller should answer as the API does.
 */
export function browserNotFound(req: FastifyRequest, reply: FastifyReply): boolean {
  const path = req.url.split("?")[0] ?? "/";
  if (API_PATHS.test(path) || !(req.headers.accept ?? "").includes("text/html")) return false;
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  reply
    .header(
      "content-security-policy",
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("x-frame-options", "DENY");
  page(
    reply,
    "error",
    {
      frame: { user: null, csrf: "", notice: null },
      status: 404,
      message: `There is no page at ${path.slice(0, 200)}.`,
    },
    404,
  );
  return true;
}

/** Static files of the dashboard: its own (assets/) and uPlot's, read once, cached a day. */
function registerAssets(scope: FastifyInstance) {
  const files: Record<string, { file: string; type: string }> = {};
  const own = path.join(packageRoot, "assets");
  for (const name of fs.readdirSync(own)) {
    const type = name.endsWith(".css")
      ? "text/css; charset=utf-8"
      : name.endsWith(".js")
        ? "text/javascript; charset=utf-8"
        : name.endsWith(".svg")
          ? "image/svg+xml"
          : null;
    if (type) files[name] = { file: path.join(own, name), type };
  }
  const uplot = path.join(packageRoot, "node_modules", "uplot", "dist");
  files["uplot.min.js"] = {
    file: path.join(uplot, "uPlot.iife.min.js"),
    type: "text/javascript; charset=utf-8",
  };
  files["uplot.min.css"] = { file: path.join(uplot, "uPlot.min.css"), type: "text/css; charset=utf-8" };
  const cache = new Map<string, Buffer>();
  scope.get<{ Params: { name: string } }>(
    "/assets/:name",
    { config: { dashboardPublic: true } },
    async (req, reply) => {
      const f = files[req.params.name];
      if (!f) return reply.code(404).type("text/plain").send("no such asset");
      let body = cache.get(f.file);
      if (!body) {
        body = fs.readFileSync(f.file);
        cache.set(f.file, body);
      }
      return reply.type(f.type).header("cache-control", "public, max-age=86400").send(body);
    },
  );
}
