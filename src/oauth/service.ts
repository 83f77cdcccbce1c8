import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { errors as joseErrors, jwtVerify, SignJWT, decodeProtectedHeader } from "jose";
import { z } from "zod";
import { READ_PERMISSIONS, type UserActor } from "../core/actor.js";
import { type AppContext, perApp } from "../core/context.js";
import { hashPassword, verifyPassword } from "../identity/passwords.js";
import { KeyRing } from "./keys.js";
import type { RelationalStore } from "../stores/relational/types.js";
import * as repo from "./repository.js";

/**
 * Vigil's OAuth 2.1 authorization server for the MCP tool server: dynamic client registration
 * (RFC 7591, public clients), authorization code with PKCE S256 only, resource indicators
 * (RFC 8707), short-lived JWT access tokens bound to the resource, opaque refresh tokens rotated
 * on every use (a replayed one revokes the grant), revocation (RFC 7009); and the browser
 * sign-in session that the consent page (and later the dashboard) uses. The door (routes.ts)
 * turns HTTP into these calls; everything a token may do is decided here.
 */

export const ACCESS_TOKEN_TTL_S = 15 * 60;
export const REFRESH_TOKEN_TTL_S = 30 * 86_400;
export const CODE_TTL_S = 60;
export const SESSION_TTL_S = 12 * 3600;
/** The one scope: read what the user can see. */
export const SCOPE = "read";
/** Registrations per address per hour; failed sign-ins per account and per address per 15 minutes. */
export const REGISTRATIONS_PER_HOUR = 20;
export const SIGNIN_FAILURES_PER_ACCOUNT = 5;
export const SIGNIN_FAILURES_PER_ADDRESS = 20;
const SIGNIN_WINDOW_MS = 15 * 60_000;
/** A client nobody used for this long is deleted, with its grants. */
export const CLIENT_IDLE_DAYS = 90;
/** How long a node trusts that a grant is live before asking the database again. */
const GRANT_CACHE_MS = 10_000;

/** An OAuth error as RFC 6749/7591/7009 name them; the door renders it. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
    readonly retryAfterS?: number,
  ) {
    super(description);
  }
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("base64url");
const token = () => randomBytes(32).toString("base64url");

export const issuer = (ctx: AppContext) => ctx.config.publicUrl;
export const mcpResource = (ctx: AppContext) => `${ctx.config.publicUrl}/mcp`;

/** Per-app state: the signing keys and the grant cache. */
const oauthState = perApp((ctx) => ({
  keys: new KeyRing(ctx.secrets),
  grants: new Map<string, { live: boolean; userId: string; at: number }>(),
  /** Access tokens whose signature and claims were verified, until they expire. */
  verified: new Map<string, { sub: string; gid: string; expMs: number }>(),
}));

export const jwks = (ctx: AppContext) => oauthState(ctx).keys.jwks();

// ---------------------------------------------------------------------------------------------
// Client registration

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** https anywhere, http only on a loopback host, never a fragment (RFC 9700 2.1, OAuth 2.1 2.3.1). */
export function checkRedirectUri(value: unknown): string {
  if (typeof value !== "string" || value.length === 0 || value.length > 2000)
    throw new OAuthError(
      "invalid_redirect_uri",
      "each redirect_uri must be a URL of at most 2000 characters",
    );
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new OAuthError("invalid_redirect_uri", `redirect_uri ${JSON.stringify(value)} is not a URL`);
  }
  if (value.includes("#"))
    throw new OAuthError("invalid_redirect_uri", `redirect_uri ${value} must not contain a fragment`);
  if (u.protocol === "https:") return value;
  if (u.protocol === "http:" && LOOPBACK.has(u.hostname)) return value;
  throw new OAuthError(
    "invalid_redirect_uri",
    `redirect_uri ${value} must use https, or http only on a loopback host (127.0.0.1, localhost, [::1])`,
  );
}

const registration = z.object({
  redirect_uris: z.array(z.unknown()).min(1).max(10),
  client_name: z.string().max(200).optional(),
  token_endpoint_auth_method: z.string().optional(),
  grant_types: z.array(z.string()).max(5).optional(),
  response_types: z.array(z.string()).max(5).optional(),
  scope: z.string().max(200).optional(),
});

export interface RegisteredClient {
  client_id: string;
  client_id_issued_at: number;
  client_name?: string;
  redirect_uris: string[];
  grant_types: string[];
  response_types: string[];
  token_endpoint_auth_method: "none";
  scope: string;
}

export async function registerClient(
  ctx: AppContext,
  body: unknown,
  address: string,
): Promise<RegisteredClient> {
  const parsed = registration.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new OAuthError(
      issue?.path[0] === "redirect_uris" ? "invalid_redirect_uri" : "invalid_client_metadata",
      `${issue?.path.join(".") || "body"}: ${issue?.message ?? "invalid"}`,
    );
  }
  const m = parsed.data;
  const redirectUris = m.redirect_uris.map(checkRedirectUri);
  if (m.token_endpoint_auth_method && m.token_endpoint_auth_method !== "none")
    throw new OAuthError(
      "invalid_client_metadata",
      "token_endpoint_auth_method must be none: Vigil registers public clients, which prove themselves with PKCE",
    );
  const grants = m.grant_types ?? ["authorization_code", "refresh_token"];
  if (grants.some((g) => g !== "authorization_code" && g !== "refresh_token"))
    throw new OAuthError(
      "invalid_client_metadata",
      "grant_types may hold only authorization_code and refresh_token",
    );
  if (m.response_types && m.response_types.some((r) => r !== "code"))
    throw new OAuthError("invalid_client_metadata", "response_types may hold only code");
  const now = ctx.now();
  const key = `register:${address}`;
  if ((await repo.throttleHit(ctx.stores.db, key, now, 3_600_000)) > REGISTRATIONS_PER_HOUR)
    throw new OAuthError(
      "invalid_request",
      `Too many client registrations from this address (at most ${REGISTRATIONS_PER_HOUR} an hour); try again later.`,
      429,
      3600,
    );
  const id = `vgc_${randomUUID().replaceAll("-", "")}`;
  await repo.insertClient(ctx.stores.db, { id, name: m.client_name ?? null, redirectUris, at: now });
  return {
    client_id: id,
    client_id_issued_at: Math.floor(now.getTime() / 1000),
    ...(m.client_name ? { client_name: m.client_name } : {}),
    redirect_uris: redirectUris,
    grant_types: grants,
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    scope: SCOPE,
  };
}

// ---------------------------------------------------------------------------------------------
// Authorization requests

export interface AuthRequest {
  clientId: string;
  clientName: string | null;
  redirectUri: string;
  codeChallenge: string;
  state: string | null;
  resource: string;
  scope: string;
}

/** What is wrong with an authorization request, and whether the client may be told by redirect. */
export type AuthorizeProblem =
  | { kind: "page"; message: string }
  | { kind: "redirect"; redirectUri: string; error: string; description: string; state: string | null };

const one = (q: Record<string, unknown>, k: string): string | null => {
  const v = q[k];
  return typeof v === "string" ? v : null;
};

/**
 * Checks an authorization request (RFC 6749 4.1.1 with OAuth 2.1's PKCE). An unknown client, or
 * a redirect URI it did not register (exactly), is shown on a page and never redirected to;
 * anything else goes back to the client as an error redirect with its `state`.
 */
export async function checkAuthorizeRequest(
  ctx: AppContext,
  q: Record<string, unknown>,
): Promise<{ ok: AuthRequest } | { problem: AuthorizeProblem }> {
  const clientId = one(q, "client_id");
  if (!clientId)
    return { problem: { kind: "page", message: "The request names no client (client_id is missing)." } };
  const client = await repo.clientById(ctx.stores.db, clientId);
  if (!client)
    return {
      problem: {
        kind: "page",
        message:
          "This application is not registered with Vigil (unknown client_id). Ask it to register again.",
      },
    };
  const redirectUri = one(q, "redirect_uri");
  if (!redirectUri || !client.redirect_uris.includes(redirectUri))
    return {
      problem: {
        kind: "page",
        message:
          "The redirect address is not one this application registered, so Vigil will not send you there.",
      },
    };
  const state = one(q, "state");
  const fail = (error: string, description: string) => ({
    problem: { kind: "redirect" as const, redirectUri, error, description, state },
  });
  if (one(q, "response_type") !== "code")
    return fail("unsupported_response_type", "response_type must be code (no implicit flow)");
  const challenge = one(q, "code_challenge");
  const method = one(q, "code_challenge_method");
  if (!challenge) return fail("invalid_request", "code_challenge is required (PKCE with S256)");
  if (method !== "S256")
    return fail("invalid_request", "code_challenge_method must be S256 (plain is not accepted)");
  if (!/^[A-Za-z0-9_-]{43,128}$/.test(challenge))
    return fail("invalid_request", "code_challenge must be the base64url SHA-256 of the code verifier");
  const resource = one(q, "resource") ?? mcpResource(ctx);
  if (resource !== mcpResource(ctx))
    return fail(
      "invalid_target",
      `resource must be ${mcpResource(ctx)}, the only resource this server protects`,
    );
  const scope = one(q, "scope");
  if (scope && !scope.split(" ").every((s) => s === SCOPE || s === ""))
    return fail("invalid_scope", `the only scope is ${SCOPE}`);
  return {
    ok: {
      clientId,
      clientName: client.name,
      redirectUri,
      codeChallenge: challenge,
      state,
      resource,
      scope: SCOPE,
    },
  };
}

/** The user approved: a single-use code for the client, bound to everything the request said. */
export async function issueCode(ctx: AppContext, req: AuthRequest, userId: string): Promise<string> {
  const code = token();
  const now = ctx.now();
  await repo.insertCode(ctx.stores.db, {
    hash: sha256(code),
    clientId: req.clientId,
    userId,
    redirectUri: req.redirectUri,
    challenge: req.codeChallenge,
    resource: req.resource,
    scope: req.scope,
    expiresAt: new Date(now.getTime() + CODE_TTL_S * 1000),
  });
  await repo.touchClient(ctx.stores.db, req.clientId, now);
  return code;
}

// ---------------------------------------------------------------------------------------------
// Tokens

export interface TokenResponse {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
  refresh_token: string;
  scope: string;
}

/** What signing an access token needs: the keys, the issuer and the time. */
interface Signer {
  keys: KeyRing;
  issuer: string;
  now: Date;
}

async function accessToken(
  signer: Signer,
  g: { id: string; userId: string; clientId: string; resource: string },
): Promise<string> {
  const k = signer.keys.current;
  const now = Math.floor(signer.now.getTime() / 1000);
  return new SignJWT({ scope: SCOPE, client_id: g.clientId, gid: g.id })
    .setProtectedHeader({ alg: "EdDSA", kid: k.kid, typ: "at+jwt" })
    .setIssuer(signer.issuer)
    .setAudience(g.resource)
    .setSubject(g.userId)
    .setIssuedAt(now)
    .setExpirationTime(now + ACCESS_TOKEN_TTL_S)
    .setJti(randomUUID())
    .sign(k.privateKey);
}

async function tokensFor(
  signer: Signer,
  db: Parameters<typeof repo.insertRefreshToken>[0],
  g: { id: string; userId: string; clientId: string; resource: string },
): Promise<TokenResponse> {
  const refresh = token();
  await repo.insertRefreshToken(db, {
    hash: sha256(refresh),
    grantId: g.id,
    at: signer.now,
    expiresAt: new Date(signer.now.getTime() + REFRESH_TOKEN_TTL_S * 1000),
  });
  return {
    access_token: await accessToken(signer, g),
    token_type: "Bearer",
    expires_in: ACCESS_TOKEN_TTL_S,
    refresh_token: refresh,
    scope: SCOPE,
  };
}

const signerOf = (ctx: AppContext): Signer => ({
  keys: oauthState(ctx).keys,
  issuer: issuer(ctx),
  now: ctx.now(),
});

/**
 * Tokens for a user without the browser flow, for tools that cannot run it (the MCP Inspector
 * CLI): `vigil admin mcp-token`. They belong to a grant of a client named "vigil admin
 * mcp-token", are revoked like any other, and the refresh token rotates as usual.
 */
export async function operatorTokens(
  db: RelationalStore,
  env: { secrets: { current: string; previous: string[] }; publicUrl: string; now: Date },
  userId: string,
): Promise<TokenResponse & { client_id: string }> {
  const clientId = `vgc_${randomUUID().replaceAll("-", "")}`;
  const resource = `${env.publicUrl}/mcp`;
  const grant = { id: randomUUID(), userId, clientId, resource };
  const signer: Signer = { keys: new KeyRing(env.secrets), issuer: env.publicUrl, now: env.now };
  const tokens = await db.transaction(async (tx) => {
    await repo.insertClient(tx, {
      id: clientId,
      name: "vigil admin mcp-token",
      redirectUris: [],
      at: env.now,
    });
    await repo.touchClient(tx, clientId, env.now);
    await repo.insertGrant(tx, { ...grant, scope: SCOPE, at: env.now });
    return tokensFor(signer, tx, grant);
  });
  return { ...tokens, client_id: clientId };
}

function pkceMatches(verifier: string, challenge: string): boolean {
  if (!/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) return false;
  const a = Buffer.from(sha256(verifier));
  const b = Buffer.from(challenge);
  return a.length === b.length && timingSafeEqual(a, b);
}

const invalidGrant = (d: string) => new OAuthError("invalid_grant", d);

/** The code for tokens (RFC 6749 4.1.3 with PKCE). A code presented twice revokes what it gave. */
export async function exchangeCode(
  ctx: AppContext,
  p: {
    code: string;
    redirectUri: string | null;
    clientId: string | null;
    verifier: string | null;
    resource: string | null;
  },
): Promise<TokenResponse> {
  if (!p.clientId) throw new OAuthError("invalid_request", "client_id is required");
  if (!p.verifier) throw new OAuthError("invalid_request", "code_verifier is required (PKCE)");
  if (!p.redirectUri) throw new OAuthError("invalid_request", "redirect_uri is required");
  const hash = sha256(p.code);
  const outcome = await ctx.stores.db.transaction(async (tx) => {
    const code = await repo.codeForUpdate(tx, hash);
    const now = ctx.now();
    if (!code) return { error: invalidGrant("the authorization code is not valid") };
    if (code.used_at) {
      if (code.grant_id) {
        await repo.revokeGrant(tx, code.grant_id, now, "authorization code used twice");
        forgetGrant(ctx, code.grant_id);
      }
      return {
        error: invalidGrant("the authorization code was already used; the tokens it gave are revoked"),
      };
    }
    if (new Date(code.expires_at).getTime() <= now.getTime())
      return { error: invalidGrant("the authorization code has expired; start the sign-in again") };
    if (code.client_id !== p.clientId)
      return { error: invalidGrant("the code was issued to another client") };
    if (code.redirect_uri !== p.redirectUri)
      return { error: invalidGrant("redirect_uri does not match the one of the authorization request") };
    if (p.resource && p.resource !== code.resource)
      return { error: new OAuthError("invalid_target", "resource does not match the authorization request") };
    if (!pkceMatches(p.verifier as string, code.code_challenge)) {
      await repo.markCodeUsed(tx, hash, null, now);
      return { error: invalidGrant("code_verifier does not match the code_challenge") };
    }
    const grant = {
      id: randomUUID(),
      userId: code.user_id,
      clientId: code.client_id,
      resource: code.resource,
    };
    await repo.insertGrant(tx, { ...grant, scope: code.scope, at: now });
    await repo.markCodeUsed(tx, hash, grant.id, now);
    return { tokens: await tokensFor(signerOf(ctx), tx, grant) };
  });
  if ("error" in outcome) throw outcome.error;
  return outcome.tokens;
}

/** A refresh token for new tokens; it is rotated, and a rotated one presented again revokes the grant. */
export async function refreshTokens(
  ctx: AppContext,
  p: { refreshToken: string; clientId: string | null; resource: string | null },
): Promise<TokenResponse> {
  if (!p.clientId) throw new OAuthError("invalid_request", "client_id is required");
  const hash = sha256(p.refreshToken);
  const outcome = await ctx.stores.db.transaction(async (tx) => {
    const row = await repo.refreshTokenForUpdate(tx, hash);
    const now = ctx.now();
    if (!row) return { error: invalidGrant("the refresh token is not valid") };
    const grant = await repo.grantById(tx, row.grant_id);
    if (!grant || grant.revoked_at) return { error: invalidGrant("the refresh token was revoked") };
    if (grant.client_id !== p.clientId)
      return { error: invalidGrant("the refresh token was issued to another client") };
    if (row.used_at) {
      await repo.revokeGrant(tx, grant.id, now, "rotated refresh token used again");
      forgetGrant(ctx, grant.id);
      return {
        error: invalidGrant("the refresh token was already used; every token of this sign-in is now revoked"),
      };
    }
    if (new Date(row.expires_at).getTime() <= now.getTime())
      return { error: invalidGrant("the refresh token has expired; sign in again") };
    if (p.resource && p.resource !== grant.resource)
      return { error: new OAuthError("invalid_target", "resource does not match the grant") };
    await repo.markRefreshUsed(tx, hash, now);
    await repo.touchClient(tx, grant.client_id, now);
    return {
      tokens: await tokensFor(signerOf(ctx), tx, {
        id: grant.id,
        userId: grant.user_id,
        clientId: grant.client_id,
        resource: grant.resource,
      }),
    };
  });
  if ("error" in outcome) throw outcome.error;
  return outcome.tokens;
}

/**
 * RFC 7009: revokes the grant behind a refresh token or an access token (so both stop). An
 * unknown or foreign token is not an error: the answer is the same either way.
 */
export async function revokeToken(
  ctx: AppContext,
  p: { token: string; clientId: string | null },
): Promise<void> {
  const now = ctx.now();
  let grantId: string | undefined;
  const refresh = await ctx.stores.db.transaction((tx) => repo.refreshTokenForUpdate(tx, sha256(p.token)));
  if (refresh) grantId = refresh.grant_id;
  else {
    const claims = await verifyJwt(ctx, p.token, { ignoreExpiry: true }).catch(() => null);
    if (claims) grantId = claims.gid;
  }
  if (!grantId) return;
  const grant = await repo.grantById(ctx.stores.db, grantId);
  if (!grant || (p.clientId && grant.client_id !== p.clientId)) return;
  await repo.revokeGrant(ctx.stores.db, grantId, now, "revoked by the client");
  forgetGrant(ctx, grantId);
}

/** Every grant and sign-in session of a user ends (`vigil admin revoke-access`). */
export async function revokeUserAccess(
  ctx: AppContext,
  userId: string,
): Promise<{ grants: number; sessions: number }> {
  const now = ctx.now();
  const ids = await repo.revokeUserGrants(ctx.stores.db, userId, now);
  for (const id of ids) forgetGrant(ctx, id);
  const sessions = await repo.deleteUserSessions(ctx.stores.db, userId);
  return { grants: ids.length, sessions };
}

function forgetGrant(ctx: AppContext, id: string) {
  oauthState(ctx).grants.delete(id);
}

/** Forgets every cached grant (another node revoked one; tests). */
export function forgetGrants(ctx: AppContext) {
  oauthState(ctx).grants.clear();
}

async function verifyJwt(ctx: AppContext, jwt: string, opts: { ignoreExpiry?: boolean } = {}) {
  const header = decodeProtectedHeader(jwt);
  const key = oauthState(ctx).keys.byKid(header.kid);
  if (!key) throw new OAuthError("invalid_token", "the token was not signed by this server", 401);
  const { payload } = await jwtVerify(jwt, key.publicKey, {
    issuer: issuer(ctx),
    audience: mcpResource(ctx),
    algorithms: ["EdDSA"],
    typ: "at+jwt",
    currentDate: opts.ignoreExpiry ? new Date(0) : ctx.now(),
    requiredClaims: ["sub", "exp", "gid"],
  });
  return { sub: String(payload.sub), gid: String(payload.gid), expMs: Number(payload.exp) * 1000 };
}

/**
 * The signed-in user behind an access token for the MCP resource: signature, issuer, audience
 * (this server's `/mcp`, nothing else) and expiry, then the grant must still be live and the user
 * must still exist (a revoked grant or a deleted user stops every token at once on this node and
 * within 10 s on others).
 */
export async function verifyAccessToken(ctx: AppContext, jwt: string): Promise<UserActor> {
  let claims: { sub: string; gid: string };
  // A token verified once is known until it expires (the signature cannot change); the grant is
  // still checked below on every call.
  const verified = oauthState(ctx).verified;
  const known = verified.get(jwt);
  try {
    if (known && known.expMs > ctx.now().getTime()) claims = known;
    else {
      const c = await verifyJwt(ctx, jwt);
      claims = c;
      if (verified.size > 10_000) verified.clear();
      verified.set(jwt, c);
    }
  } catch (err) {
    if (err instanceof OAuthError) throw err;
    if (err instanceof joseErrors.JWTExpired)
      throw new OAuthError("invalid_token", "the access token has expired", 401);
    if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === "aud")
      throw new OAuthError("invalid_token", `the access token is not for ${mcpResource(ctx)}`, 401);
    throw new OAuthError("invalid_token", "the access token is not valid", 401);
  }
  const cache = oauthState(ctx).grants;
  const now = ctx.now().getTime();
  let g = cache.get(claims.gid);
  if (!g || now - g.at > GRANT_CACHE_MS) {
    const row = await repo.grantById(ctx.stores.db, claims.gid);
    g = { live: !!row && !row.revoked_at, userId: row?.user_id ?? "", at: now };
    if (cache.size > 50_000) cache.clear();
    cache.set(claims.gid, g);
  }
  if (!g.live || g.userId !== claims.sub)
    throw new OAuthError("invalid_token", "the access token was revoked; sign in again", 401);
  return { type: "user", userId: claims.sub, via: "oauth", permissions: new Set(READ_PERMISSIONS) };
}

// ---------------------------------------------------------------------------------------------
// Sign-in and sessions

let dummyHash: Promise<string> | undefined;

export type SignInOutcome = { userId: string } | { error: string; retryAfterS?: number };

/**
 * Email and password (as `vigil admin create-user --password` stores them). The answer never says
 * whether the account exists: unknown accounts cost the same scrypt, and failures are limited per
 * account (5 in 15 minutes) and per address (20), with the same message for both.
 */
export async function signIn(
  ctx: AppContext,
  email: string,
  password: string,
  address: string,
): Promise<SignInOutcome> {
  const db = ctx.stores.db;
  const now = ctx.now();
  const acct = `signin:acct:${email.trim().toLowerCase().slice(0, 320)}`;
  const addr = `signin:addr:${address}`;
  const blocked = async () =>
    (await repo.throttleCount(db, acct, now, SIGNIN_WINDOW_MS)) >= SIGNIN_FAILURES_PER_ACCOUNT ||
    (await repo.throttleCount(db, addr, now, SIGNIN_WINDOW_MS)) >= SIGNIN_FAILURES_PER_ADDRESS;
  const tooMany = {
    error: "Too many failed sign-ins. Wait 15 minutes, then try again.",
    retryAfterS: SIGNIN_WINDOW_MS / 1000,
  };
  if (await blocked()) return tooMany;
  const user = email && password.length <= 1024 ? await repo.userForSignIn(db, email.trim()) : undefined;
  dummyHash ??= hashPassword(randomBytes(16).toString("hex"));
  const ok = user?.password_hash
    ? await verifyPassword(password, user.password_hash)
    : (await verifyPassword(password, await dummyHash), false);
  if (ok && user) {
    await repo.throttleClear(db, acct);
    return { userId: user.id };
  }
  await repo.throttleHit(db, acct, now, SIGNIN_WINDOW_MS);
  await repo.throttleHit(db, addr, now, SIGNIN_WINDOW_MS);
  return { error: "The email or password is not right." };
}

export async function createSession(
  ctx: AppContext,
  userId: string,
): Promise<{ id: string; maxAgeS: number }> {
  const id = token();
  const now = ctx.now();
  await repo.insertSession(ctx.stores.db, {
    hash: sha256(id),
    userId,
    at: now,
    expiresAt: new Date(now.getTime() + SESSION_TTL_S * 1000),
  });
  return { id, maxAgeS: SESSION_TTL_S };
}

export async function sessionFor(
  ctx: AppContext,
  id: string | undefined,
): Promise<{ userId: string; email: string } | null> {
  if (!id || id.length > 100) return null;
  const row = await repo.sessionUser(ctx.stores.db, sha256(id), ctx.now());
  return row ? { userId: row.user_id, email: row.email } : null;
}

export async function endSession(ctx: AppContext, id: string | undefined): Promise<void> {
  if (id && id.length <= 100) await repo.deleteSession(ctx.stores.db, sha256(id));
}

/** Housekeeping (a job): expired codes, refresh tokens, sessions, throttles and stale clients. */
export async function cleanUp(ctx: AppContext): Promise<Record<string, number>> {
  const db = ctx.stores.db;
  const now = ctx.now();
  return {
    codes: await repo.deleteExpiredCodes(db, now),
    refreshTokens: await repo.deleteExpiredRefreshTokens(db, now),
    sessions: await repo.deleteExpiredSessions(db, now),
    throttles: await repo.deleteOldThrottles(db, new Date(now.getTime() - 86_400_000)),
    clients: await repo.deleteStaleClients(db, now, CLIENT_IDLE_DAYS),
  };
}
