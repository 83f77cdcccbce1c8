import { createHash, randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../src/core/context.js";
import { issueCode, mcpResource } from "../../src/oauth/service.js";

/**
 * Drives Vigil's OAuth pages as a browser would, through `app.inject`: a cookie jar, the sign-in
 * form, the consent form. Used by the OAuth and MCP tests.
 */
export class Browser {
  readonly cookies = new Map<string, string>();

  constructor(readonly app: FastifyInstance) {}

  private cookieHeader() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  private keep(setCookie: string | string[] | undefined) {
    for (const c of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [pair] = c.split(";");
      const i = (pair ?? "").indexOf("=");
      const name = (pair ?? "").slice(0, i);
      const value = (pair ?? "").slice(i + 1);
      if (/max-age=0|expires=thu, 01 jan 1970/i.test(c) || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  async get(url: string) {
    const res = await this.app.inject({ method: "GET", url, headers: { cookie: this.cookieHeader() } });
    this.keep(res.headers["set-cookie"]);
    return res;
  }

  async post(url: string, form: Record<string, string>) {
    const res = await this.app.inject({
      method: "POST",
      url,
      headers: { cookie: this.cookieHeader(), "content-type": "application/x-www-form-urlencoded" },
      payload: new URLSearchParams(form).toString(),
    });
    this.keep(res.headers["set-cookie"]);
    return res;
  }
}

/** The hidden and named inputs of the first form on a page. */
export function formFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out[m[1] as string] = (m[2] as string)
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&amp;/g, "&");
  }
  return out;
}

export function pkce() {
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  return { verifier, challenge };
}

export const REDIRECT = "http://127.0.0.1:7777/callback";

export async function registerClient(
  app: FastifyInstance,
  redirectUris = [REDIRECT],
  name = "Test assistant",
) {
  const res = await app.inject({
    method: "POST",
    url: "/oauth/register",
    payload: { client_name: name, redirect_uris: redirectUris, token_endpoint_auth_method: "none" },
  });
  return res.json() as { client_id: string };
}

export function authorizeUrl(p: {
  clientId: string;
  challenge: string;
  redirectUri?: string;
  state?: string;
  resource?: string;
  extra?: Record<string, string>;
}) {
  const q = new URLSearchParams({
    response_type: "code",
    client_id: p.clientId,
    redirect_uri: p.redirectUri ?? REDIRECT,
    code_challenge: p.challenge,
    code_challenge_method: "S256",
    state: p.state ?? "xyz",
    ...(p.resource ? { resource: p.resource } : {}),
    ...p.extra,
  });
  return `/oauth/authorize?${q}`;
}

/** Signs in on the page the authorize request sends to, approves, and returns the code. */
export async function approve(
  browser: Browser,
  url: string,
  user: { email: string; password: string },
  decision: "approve" | "deny" = "approve",
): Promise<URL> {
  let res = await browser.get(url);
  if (res.statusCode === 302 && String(res.headers.location).startsWith("/signin")) {
    const page = await browser.get(String(res.headers.location));
    const fields = formFields(page.body);
    const signed = await browser.post("/signin", { ...fields, email: user.email, password: user.password });
    if (signed.statusCode !== 303)
      throw new Error(`sign-in failed: ${signed.statusCode} ${signed.body.slice(0, 200)}`);
    res = await browser.get(String(signed.headers.location));
  }
  if (res.statusCode !== 200) throw new Error(`no consent page: ${res.statusCode} ${res.body.slice(0, 300)}`);
  const done = await browser.post("/oauth/authorize", { ...formFields(res.body), decision });
  if (done.statusCode !== 302)
    throw new Error(`consent failed: ${done.statusCode} ${done.body.slice(0, 300)}`);
  return new URL(String(done.headers.location));
}

export async function tokenRequest(app: FastifyInstance, form: Record<string, string>) {
  return app.inject({
    method: "POST",
    url: "/oauth/token",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    payload: new URLSearchParams(form).toString(),
  });
}

/**
 * An access token for `userId` through the real authorization server (registration, a code as
 * the consent page issues it, the PKCE exchange): for tests that need a signed-in user at /mcp
 * without driving the pages.
 */
export async function mcpTokenFor(app: FastifyInstance, ctx: AppContext, userId: string): Promise<string> {
  const client = await registerClient(app);
  const { verifier, challenge } = pkce();
  const code = await issueCode(
    ctx,
    {
      clientId: client.client_id,
      clientName: "test",
      redirectUri: REDIRECT,
      codeChallenge: challenge,
      state: null,
      resource: mcpResource(ctx),
      scope: "read",
    },
    userId,
  );
  const res = await tokenRequest(app, {
    grant_type: "authorization_code",
    code,
    redirect_uri: REDIRECT,
    client_id: client.client_id,
    code_verifier: verifier,
  });
  return (res.json() as { access_token: string }).access_token;
}
