import type { FastifyReply, FastifyRequest } from "fastify";
import { PERMISSIONS, type UserActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { perApp } from "../core/context.js";
import { sessionIdOf } from "../http/browser.js";
import { sessionFor } from "../oauth/service.js";
import { anyUserExists } from "./repository.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** A dashboard page anyone may open (first run, an invitation link, assets). */
    dashboardPublic?: boolean;
  }
  interface FastifyRequest {
    /** The signed-in person on a dashboard page (set by `requireSession`). */
    dashboardUser?: { actor: UserActor; email: string };
  }
}

/** Whether a user exists yet, remembered once true (users are never all deleted while serving). */
const firstRunDone = perApp(() => ({ done: false }));

/**
 * The dashboard's sign-in check, before every page that is not `dashboardPublic`: the session
 * cookie of /signin turns into the signed-in user as an Actor (`type: "user"`, `via: "session"`,
 * every permission: a person in the dashboard may do what the user may do; which connections and
 * organizations that reaches is decided by the core, as for REST and MCP). Without a session a
 * GET goes to /signin and comes back; a form post gets a 401 page. While no user exists at all,
 * every page goes to the first-run page (/setup).
 */
export function requireSession(ctx: AppContext) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    if (req.routeOptions.config?.dashboardPublic) return;
    const first = firstRunDone(ctx);
    if (!first.done) {
      if (await anyUserExists(ctx.stores.db)) first.done = true;
      else return reply.code(303).header("location", "/setup").send();
    }
    const s = await sessionFor(ctx, sessionIdOf(req));
    if (!s) {
      if (req.method === "GET" || req.method === "HEAD")
        return reply
          .code(303)
          .header("location", `/signin?return_to=${encodeURIComponent(req.url.slice(0, 2000))}`)
          .send();
      return reply
        .code(401)
        .type("text/html; charset=utf-8")
        .send(
          '<!doctype html><html lang="en"><title>Signed out · Vigil</title><p>Your sign-in ended; nothing was changed. <a href="/signin">Sign in</a> and try again.</p></html>',
        );
    }
    req.dashboardUser = {
      email: s.email,
      actor: { type: "user", userId: s.userId, via: "session", permissions: new Set(PERMISSIONS) },
    };
  };
}

/** The signed-in user of a page that requires a session. */
export function dashboardActor(req: FastifyRequest): UserActor {
  if (!req.dashboardUser) throw new Error("dashboard: page reached without a session");
  return req.dashboardUser.actor;
}

/** Marks the first run done (the first-run page calls it once it created the owner). */
export function markFirstRunDone(ctx: AppContext): void {
  firstRunDone(ctx).done = true;
}
