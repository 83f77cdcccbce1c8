import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { UserActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import {
  registerBrowserBasics,
  SESSION_COOKIE,
  secureCookies,
  sessionIdOf,
  setSessionCookie,
} from "../http/browser.js";
import { consentPage, errorPage, signInPage } from "./pages.js";
import {
  type AuthRequest,
  checkAuthorizeRequest,
  createSession,
  endSession,
  exchangeCode,
  issueCode,
  issuer,
  jwks,
  mcpResource,
  OAuthError,
  refreshTokens,
  registerClient,
  revokeToken,
  SCOPE,
  sessionFor,
  signIn,
  verifyAccessToken,
} from "./service.js";

/**
 * The OAuth 2.1 door: discovery documents, registration, the authorize flow with Vigil's own
 * sign-in and consent pages, token, revocation and JWKS; and `mcpAuthenticate`, which turns a
 * bearer token at /mcp into the signed-in user. Paths:
 *
 *   GET  /.well-known/oauth-protected-resource[/mcp]  RFC 9728
 *   GET  /.well-known/oauth-authorization-server      RFC 8414
 *   POST /oauth/register                              RFC 7591
 *   GET  /oauth/authorize, POST /oauth/authorize      sign-in redirect, consent, code
 *   POST /oauth/token                                 authorization_code, refresh_token
 *   POST /oauth/revoke                                RFC 7009
 *   GET  /oauth/jwks                                  the access-token signing keys
 *   GET  /signin, POST /signin, POST /signout         the browser session (the dashboard's too)
 */

export { SESSION_COOKIE, secureCookies };

export const protectedResourceMetadata = (ctx: AppContext) => ({
  resource: mcpResource(ctx),
  authorization_servers: [issuer(ctx)],
  bearer_methods_supported: ["header"],
  scopes_supported: [SCOPE],
  resource_name: "Vigil",
  resource_documentation: `${issuer(ctx)}/docs`,
});

export const authorizationServerMetadata = (ctx: AppContext) => {
  const base = issuer(ctx);
  return {
    issuer: base,
    authorization_endpoint: `${base}/oauth/authorize`,
    token_endpoint: `${base}/oauth/token`,
    registration_endpoint: `${base}/oauth/register`,
    revocation_endpoint: `${base}/oauth/revoke`,
    jwks_uri: `${base}/oauth/jwks`,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["none"],
    revocation_endpoint_auth_methods_supported: ["none"],
    scopes_supported: [SCOPE],
    authorization_response_iss_parameter_supported: true,
  };
};

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

/** A same-site path to return to after sign-in; anything else goes to the start page. */
function safeReturn(v: unknown): string {
  const s = str(v);
  return s && s.startsWith("/") && !s.startsWith("//") && !s.startsWith("/\\") && s.length <= 4000 ? s : "/";
}

function sendOAuthError(reply: FastifyReply, err: OAuthError) {
  if (err.retryAfterS) reply.header("Retry-After", err.retryAfterS);
  if (err.status === 401) reply.header("WWW-Authenticate", `Bearer error="${err.error}"`);
  return reply
    .code(err.status)
    .header("Cache-Control", "no-store")
    .send({ error: err.error, error_description: err.description });
}

function redirectWith(
  reply: FastifyReply,
  ctx: AppContext,
  uri: string,
  params: Record<string, string | null>,
) {
  const u = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== null) u.searchParams.set(k, v);
  u.searchParams.set("iss", issuer(ctx));
  return reply.code(302).header("Location", u.toString()).header("Cache-Control", "no-store").send();
}

const HTML_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "x-frame-options": "DENY",
  "content-security-policy":
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
};
const html = (reply: FastifyReply, status: number, body: string) =>
  reply.code(status).headers(HTML_HEADERS).send(body);

/** The authorization request's parameters, carried through the consent form. */
const requestFields = (r: AuthRequest): Record<string, string | null> => ({
  response_type: "code",
  client_id: r.clientId,
  redirect_uri: r.redirectUri,
  code_challenge: r.codeChallenge,
  code_challenge_method: "S256",
  state: r.state,
  resource: r.resource,
  scope: r.scope,
});

export async function registerOAuth(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.get("/.well-known/oauth-protected-resource", async () => protectedResourceMetadata(ctx));
  app.get("/.well-known/oauth-protected-resource/mcp", async () => protectedResourceMetadata(ctx));
  app.get("/.well-known/oauth-authorization-server", async () => authorizationServerMetadata(ctx));
  app.get("/oauth/jwks", async (_req, reply) => {
    reply.header("Cache-Control", "public, max-age=300");
    return jwks(ctx);
  });

  await app.register(async (scope) => {
    await registerBrowserBasics(scope, ctx);

    scope.setErrorHandler((err, req, reply) => {
      if (err instanceof OAuthError) return sendOAuthError(reply, err);
      const e = err as { statusCode?: number; code?: string; message?: string };
      const status = e.statusCode && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : 500;
      if (status >= 500) req.log.error({ err }, "oauth request failed");
      if (e.code?.startsWith("FST_CSRF"))
        return html(
          reply,
          403,
          errorPage("The form expired or came from another site. Go back, reload and try again."),
        );
      const description =
        status === 413
          ? "the request body is too large"
          : status >= 500
            ? "internal error; try again"
            : `bad request: ${e.message ?? "unreadable body"}`;
      return reply
        .code(status)
        .header("Cache-Control", "no-store")
        .send({ error: status >= 500 ? "server_error" : "invalid_request", error_description: description });
    });

    const session = (req: FastifyRequest) => sessionFor(ctx, sessionIdOf(req));
    const sessionId = sessionIdOf;

    scope.post("/oauth/register", { bodyLimit: 16 * 1024 }, async (req, reply) => {
      const client = await registerClient(ctx, req.body, req.ip);
      return reply.code(201).header("Cache-Control", "no-store").send(client);
    });

    const showAuthorize = async (reply: FastifyReply, params: Record<string, unknown>) => {
      const checked = await checkAuthorizeRequest(ctx, params);
      if ("problem" in checked) {
        const p = checked.problem;
        if (p.kind === "page") return html(reply, 400, errorPage(p.message));
        return redirectWith(reply, ctx, p.redirectUri, {
          error: p.error,
          error_description: p.description,
          state: p.state,
        });
      }
      return checked.ok;
    };

    scope.get("/oauth/authorize", async (req, reply) => {
      const q = req.query as Record<string, unknown>;
      const ok = await showAuthorize(reply, q);
      if (!ok || reply.sent) return reply;
      const user = await session(req);
      if (!user) {
        const back = req.url;
        return reply
          .code(302)
          .header("Location", `/signin?return_to=${encodeURIComponent(back)}`)
          .send();
      }
      return html(
        reply,
        200,
        consentPage({
          action: "/oauth/authorize",
          csrf: reply.generateCsrf(),
          clientName: ok.clientName,
          clientId: ok.clientId,
          redirectUri: ok.redirectUri,
          email: user.email,
          fields: requestFields(ok),
        }),
      );
    });

    scope.post("/oauth/authorize", { preHandler: scope.csrfProtection }, async (req, reply) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const ok = await showAuthorize(reply, body);
      if (!ok || reply.sent) return reply;
      const user = await session(req);
      if (!user) return html(reply, 401, errorPage("Your sign-in ended. Start again from the application."));
      const decision = str(body.decision);
      if (decision === "approve") {
        const code = await issueCode(ctx, ok, user.userId);
        return redirectWith(reply, ctx, ok.redirectUri, { code, state: ok.state });
      }
      return redirectWith(reply, ctx, ok.redirectUri, {
        error: "access_denied",
        error_description: "the user denied access",
        state: ok.state,
      });
    });

    scope.get("/signin", async (req, reply) => {
      const q = req.query as Record<string, unknown>;
      return html(
        reply,
        200,
        signInPage({ action: "/signin", csrf: reply.generateCsrf(), returnTo: safeReturn(q.return_to) }),
      );
    });

    scope.post("/signin", { preHandler: scope.csrfProtection }, async (req, reply) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const email = (str(body.email) ?? "").slice(0, 320);
      const password = str(body.password) ?? "";
      const returnTo = safeReturn(body.return_to);
      const outcome = await signIn(ctx, email, password, req.ip);
      if ("error" in outcome) {
        // A failure costs the caller time too, whatever the reason.
        await new Promise((r) => setTimeout(r, 400));
        if (outcome.retryAfterS) reply.header("Retry-After", outcome.retryAfterS);
        return html(
          reply,
          outcome.retryAfterS ? 429 : 401,
          signInPage({
            action: "/signin",
            csrf: reply.generateCsrf(),
            returnTo,
            email,
            error: outcome.error,
          }),
        );
      }
      await endSession(ctx, sessionId(req));
      const s = await createSession(ctx, outcome.userId);
      setSessionCookie(reply, ctx.config.publicUrl, s);
      return reply.code(303).header("Location", returnTo).send();
    });

    scope.post("/signout", { preHandler: scope.csrfProtection }, async (req, reply) => {
      await endSession(ctx, sessionId(req));
      reply.clearCookie(SESSION_COOKIE, { path: "/" });
      return reply.code(303).header("Location", "/signin").send();
    });

    const tokenParams = (req: FastifyRequest) => (req.body ?? {}) as Record<string, unknown>;

    scope.post("/oauth/token", { bodyLimit: 16 * 1024 }, async (req, reply) => {
      const b = tokenParams(req);
      const grantType = str(b.grant_type);
      reply.header("Cache-Control", "no-store").header("Pragma", "no-cache");
      if (grantType === "authorization_code") {
        const code = str(b.code);
        if (!code) throw new OAuthError("invalid_request", "code is required");
        return exchangeCode(ctx, {
          code,
          redirectUri: str(b.redirect_uri),
          clientId: str(b.client_id),
          verifier: str(b.code_verifier),
          resource: str(b.resource),
        });
      }
      if (grantType === "refresh_token") {
        const refreshToken = str(b.refresh_token);
        if (!refreshToken) throw new OAuthError("invalid_request", "refresh_token is required");
        return refreshTokens(ctx, { refreshToken, clientId: str(b.client_id), resource: str(b.resource) });
      }
      if (!grantType) throw new OAuthError("invalid_request", "grant_type is required");
      throw new OAuthError(
        "unsupported_grant_type",
        `grant_type ${grantType} is not supported; use authorization_code or refresh_token`,
      );
    });

    scope.post("/oauth/revoke", { bodyLimit: 16 * 1024 }, async (req, reply) => {
      const b = tokenParams(req);
      const t = str(b.token);
      if (!t) throw new OAuthError("invalid_request", "token is required");
      await revokeToken(ctx, { token: t, clientId: str(b.client_id) });
      return reply.code(200).header("Cache-Control", "no-store").send({});
    });
  });
}

/**
 * Authenticates a request to /mcp: `Authorization: Bearer <access token>` for this resource. On
 * failure it answers 401 with `WWW-Authenticate: Bearer resource_metadata="…"` (plus
 * `error="invalid_token"` when a token was sent), so a client can discover where to sign in; a
 * token in the query string is refused. REST API keys are not accepted here.
 */
export function mcpAuthenticate(ctx: AppContext) {
  const metadata = `${issuer(ctx)}/.well-known/oauth-protected-resource/mcp`;
  return async (req: FastifyRequest, reply: FastifyReply): Promise<UserActor | null> => {
    const q = req.query as Record<string, unknown> | undefined;
    if (q && "access_token" in q) {
      await reply.code(400).header("Cache-Control", "no-store").send({
        error: "invalid_request",
        error_description: "send the access token in the Authorization header, never in the URL",
      });
      return null;
    }
    const header = req.headers.authorization;
    const m = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    const refuse = async (error: string | null, description: string) => {
      await reply
        .code(401)
        .header(
          "WWW-Authenticate",
          `Bearer resource_metadata="${metadata}"${error ? `, error="${error}", error_description="${description}"` : ""}`,
        )
        .send({ error: error ?? "unauthorized", error_description: description });
      return null;
    };
    if (!header)
      return refuse(null, "sign in: this server needs an OAuth access token (see resource_metadata)");
    if (!m?.[1]) return refuse("invalid_request", "expected Authorization: Bearer <access token>");
    const token = m[1];
    if (/^vg[li]_/.test(token))
      return refuse("invalid_token", "API keys are not accepted by the tool server; connect with OAuth");
    try {
      return await verifyAccessToken(ctx, token);
    } catch (err) {
      if (err instanceof OAuthError) return refuse("invalid_token", err.description);
      throw err;
    }
  };
}
