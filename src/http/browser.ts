import { hkdfSync } from "node:crypto";
import fastifyCookie from "@fastify/cookie";
import fastifyCsrf from "@fastify/csrf-protection";
import fastifyFormbody from "@fastify/formbody";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../core/context.js";

/**
 * What every page a browser uses shares: the sign-in pages of the OAuth door and the dashboard.
 * Signed cookies (a key derived from VIGIL_SECRET), url-encoded forms (16 KiB at most) and CSRF
 * tokens (a signed, HttpOnly, SameSite=Strict secret cookie `vigil_csrf`; forms carry `_csrf`).
 * Registered in each door's own encapsulated scope, with the same key, so a session cookie set
 * by /signin is read by the dashboard.
 */
export const SESSION_COOKIE = "vigil_session";
export const FORM_BODY_LIMIT = 16 * 1024;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** Secure cookies everywhere but plain http on a loopback host (a developer's machine). */
export function secureCookies(publicUrl: string): boolean {
  const u = new URL(publicUrl);
  return !(u.protocol === "http:" && LOOPBACK.has(u.hostname));
}

export async function registerBrowserBasics(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const secure = secureCookies(ctx.config.publicUrl);
  const cookieSecret = Buffer.from(
    hkdfSync("sha256", ctx.secrets.current, "vigil", "cookie signing v1", 32),
  ).toString("base64url");
  await scope.register(fastifyCookie, { secret: cookieSecret });
  await scope.register(fastifyFormbody, { bodyLimit: FORM_BODY_LIMIT });
  await scope.register(fastifyCsrf, {
    cookieKey: "vigil_csrf",
    cookieOpts: { path: "/", httpOnly: true, sameSite: "strict", secure, signed: true },
    getToken: (req) => {
      const v = (req.body as Record<string, unknown> | undefined)?._csrf;
      return typeof v === "string" ? v : undefined;
    },
  });
}

/** The session id from the signed session cookie, or undefined. */
export function sessionIdOf(req: FastifyRequest): string | undefined {
  const raw = req.cookies[SESSION_COOKIE];
  const unsigned = raw ? req.unsignCookie(raw) : null;
  return unsigned?.valid ? (unsigned.value ?? undefined) : undefined;
}

/** Sets the signed session cookie of a new session: HttpOnly, SameSite=Lax, Secure but on http loopback. */
export function setSessionCookie(
  reply: FastifyReply,
  publicUrl: string,
  s: { id: string; maxAgeS: number },
): void {
  reply.setCookie(SESSION_COOKIE, s.id, {
    path: "/",
    httpOnly: true,
    sameSite: "lax",
    secure: secureCookies(publicUrl),
    signed: true,
    maxAge: s.maxAgeS,
  });
}
