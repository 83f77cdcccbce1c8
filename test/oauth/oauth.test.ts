import t, { type Test } from "tap";
import { runAdmin } from "../../src/admin/commands.js";
import { createUser } from "../../src/identity/accounts.js";
import { forgetGrants, revokeUserAccess, verifyAccessToken } from "../../src/oauth/service.js";
import { testApp } from "../helpers/app.js";
import { clearOfHourEnd } from "../helpers/hours.js";
import {
  approve,
  authorizeUrl,
  Browser,
  formFields,
  pkce,
  REDIRECT,
  registerClient,
  tokenRequest,
} from "../helpers/oauth.js";

/**
 * Vigil's OAuth 2.1 authorization server: discovery, registration, the authorize flow with its
 * sign-in and consent pages, tokens, refresh rotation, revocation, and every MUST of issue #13
 * as a negative test. The MCP end-to-end test (test/mcp) drives the same server with the SDK.
 */

const PUBLIC = "http://127.0.0.1:8080";

async function setup(t: Test) {
  const ta = await testApp(t, { env: { PUBLIC_URL: PUBLIC } });
  const user = { email: "ada@example.com", password: "correct horse battery" };
  const u = await createUser(ta.ctx.stores.db, { email: user.email, password: user.password });
  const client = await registerClient(ta.app);
  return { ...ta, user, userId: u.id as string, client };
}

async function signedInTokens(s: Awaited<ReturnType<typeof setup>>, resource = `${PUBLIC}/mcp`) {
  const { verifier, challenge } = pkce();
  const browser = new Browser(s.app);
  const back = await approve(
    browser,
    authorizeUrl({ clientId: s.client.client_id, challenge, resource }),
    s.user,
  );
  const code = back.searchParams.get("code") as string;
  const res = await tokenRequest(s.app, {
    grant_type: "authorization_code",
    code,
    redirect_uri: REDIRECT,
    client_id: s.client.client_id,
    code_verifier: verifier,
    resource,
  });
  return { res, code, verifier, browser, tokens: res.json() as Record<string, string> };
}

t.test("discovery documents", async (t) => {
  const { app } = await setup(t);
  for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]) {
    const prm = (await app.inject(path)).json();
    t.equal(prm.resource, `${PUBLIC}/mcp`, `${path}: resource is exactly PUBLIC_URL/mcp`);
    t.same(prm.authorization_servers, [PUBLIC]);
  }
  const as = (await app.inject("/.well-known/oauth-authorization-server")).json();
  t.match(as, {
    issuer: PUBLIC,
    authorization_endpoint: `${PUBLIC}/oauth/authorize`,
    token_endpoint: `${PUBLIC}/oauth/token`,
    registration_endpoint: `${PUBLIC}/oauth/register`,
    revocation_endpoint: `${PUBLIC}/oauth/revoke`,
    code_challenge_methods_supported: ["S256"],
    grant_types_supported: ["authorization_code", "refresh_token"],
  });
  t.ok(as.token_endpoint_auth_methods_supported.includes("none"));
  const jwks = (await app.inject(as.jwks_uri.replace(PUBLIC, ""))).json();
  t.equal(jwks.keys[0].kty, "OKP");
  t.notOk("d" in jwks.keys[0], "no private part");
});

t.test("registration validates redirect URIs and metadata", async (t) => {
  const { app } = await setup(t);
  const reg = (body: unknown) =>
    app.inject({ method: "POST", url: "/oauth/register", payload: body as object });
  const ok = await reg({ redirect_uris: ["https://assistant.example/cb", "http://localhost:3000/cb"] });
  t.equal(ok.statusCode, 201);
  t.match(ok.json(), { client_id: /^vgc_/, token_endpoint_auth_method: "none" });
  const cases: [unknown, string][] = [
    [{ redirect_uris: ["http://evil.example/cb"] }, "invalid_redirect_uri"],
    [{ redirect_uris: ["https://a.example/cb#frag"] }, "invalid_redirect_uri"],
    [{ redirect_uris: ["not a url"] }, "invalid_redirect_uri"],
    [{ redirect_uris: [] }, "invalid_redirect_uri"],
    [{}, "invalid_redirect_uri"],
    [
      { redirect_uris: ["https://a.example/cb"], token_endpoint_auth_method: "client_secret_basic" },
      "invalid_client_metadata",
    ],
    [{ redirect_uris: ["https://a.example/cb"], grant_types: ["implicit"] }, "invalid_client_metadata"],
    [{ redirect_uris: ["https://a.example/cb"], client_name: "x".repeat(500) }, "invalid_client_metadata"],
  ];
  for (const [body, error] of cases) {
    const res = await reg(body);
    t.equal(res.statusCode, 400, JSON.stringify(body).slice(0, 80));
    t.equal(res.json().error, error);
    t.ok(res.json().error_description, "with a description");
  }
  const big = await reg({ redirect_uris: ["https://a.example/cb"], client_name: "y".repeat(20_000) });
  t.equal(big.statusCode, 413, "bounded in size");
  const notJson = await app.inject({
    method: "POST",
    url: "/oauth/register",
    headers: { "content-type": "application/json" },
    payload: "{nope",
  });
  t.equal(notJson.statusCode, 400);
  t.equal(notJson.json().error, "invalid_request");
});

t.test("registrations are rate limited per address", async (t) => {
  const { app } = await setup(t);
  await clearOfHourEnd();
  let last = 0;
  for (let i = 0; i < 21; i++)
    last = (
      await app.inject({ method: "POST", url: "/oauth/register", payload: { redirect_uris: [REDIRECT] } })
    ).statusCode;
  t.equal(last, 429, "the 21st within an hour is refused");
});

t.test("the whole flow: sign-in, consent, code with PKCE, tokens bound to the resource", async (t) => {
  const s = await setup(t);
  const { res, tokens } = await signedInTokens(s);
  t.equal(res.statusCode, 200);
  t.equal(res.headers["cache-control"], "no-store");
  t.match(tokens, { token_type: "Bearer", expires_in: 900, scope: "read" });
  const actor = await verifyAccessToken(s.ctx, tokens.access_token as string);
  t.equal(actor.userId, s.userId, "sub is the user");
  const claims = JSON.parse(
    Buffer.from((tokens.access_token as string).split(".")[1] as string, "base64url").toString(),
  );
  t.equal(claims.aud, `${PUBLIC}/mcp`);
  t.equal(claims.iss, PUBLIC);
  t.ok(claims.exp - claims.iat === 900);
  const header = JSON.parse(
    Buffer.from((tokens.access_token as string).split(".")[0] as string, "base64url").toString(),
  );
  t.ok(header.kid, "with a key id");
  const row = await s.ctx.stores.db.query<{ token_hash: string }>(
    "SELECT token_hash FROM oauth_refresh_tokens",
  );
  t.not(row.rows[0]?.token_hash, tokens.refresh_token, "refresh tokens are stored hashed");
});

t.test("state is echoed, iss is added, deny gives access_denied", async (t) => {
  const s = await setup(t);
  const { challenge } = pkce();
  const back = await approve(
    new Browser(s.app),
    authorizeUrl({ clientId: s.client.client_id, challenge, state: "s-123" }),
    s.user,
    "deny",
  );
  t.equal(back.origin + back.pathname, REDIRECT);
  t.equal(back.searchParams.get("error"), "access_denied");
  t.equal(back.searchParams.get("state"), "s-123");
  t.equal(back.searchParams.get("iss"), PUBLIC);
});

t.test("an unknown client or an unregistered redirect URI gets a page, never a redirect", async (t) => {
  const s = await setup(t);
  const { challenge } = pkce();
  const unknown = await s.app.inject(authorizeUrl({ clientId: "vgc_nope", challenge }));
  t.equal(unknown.statusCode, 400);
  t.notOk(unknown.headers.location);
  t.match(unknown.body, /not registered/);
  const wrong = await s.app.inject(
    authorizeUrl({ clientId: s.client.client_id, challenge, redirectUri: "http://127.0.0.1:7777/other" }),
  );
  t.equal(wrong.statusCode, 400);
  t.notOk(wrong.headers.location, "redirect mismatch: no redirect");
  const prefix = await s.app.inject(
    authorizeUrl({ clientId: s.client.client_id, challenge, redirectUri: `${REDIRECT}/../evil` }),
  );
  t.equal(prefix.statusCode, 400, "exact match only");
});

t.test("PKCE S256 is required; no plain, no implicit; the resource must be Vigil's /mcp", async (t) => {
  const s = await setup(t);
  const { challenge } = pkce();
  const go = async (extra: Record<string, string>, without: string[] = []) => {
    const u = new URL(authorizeUrl({ clientId: s.client.client_id, challenge, extra }), PUBLIC);
    for (const w of without) u.searchParams.delete(w);
    const res = await s.app.inject(u.pathname + u.search);
    t.equal(res.statusCode, 302);
    return new URL(String(res.headers.location));
  };
  t.equal((await go({}, ["code_challenge"])).searchParams.get("error"), "invalid_request", "missing PKCE");
  t.equal(
    (await go({ code_challenge_method: "plain" })).searchParams.get("error"),
    "invalid_request",
    "plain refused",
  );
  t.equal((await go({ response_type: "token" })).searchParams.get("error"), "unsupported_response_type");
  t.equal((await go({ resource: "https://other.example/mcp" })).searchParams.get("error"), "invalid_target");
  t.equal((await go({ scope: "admin" })).searchParams.get("error"), "invalid_scope");
  t.equal(
    (await go({ code_challenge_method: "plain" })).searchParams.get("state"),
    "xyz",
    "state echoed on errors",
  );
});

t.test("codes: single use, short-lived, bound to verifier, client and redirect URI", async (t) => {
  const s = await setup(t);
  const { verifier, challenge } = pkce();
  const browser = new Browser(s.app);
  const newCode = async () =>
    (
      await approve(browser, authorizeUrl({ clientId: s.client.client_id, challenge }), s.user)
    ).searchParams.get("code") as string;
  const exchange = (code: string, over: Record<string, string> = {}) =>
    tokenRequest(s.app, {
      grant_type: "authorization_code",
      code,
      redirect_uri: REDIRECT,
      client_id: s.client.client_id,
      code_verifier: verifier,
      ...over,
    });

  let code = await newCode();
  const res = await exchange(code, { code_verifier: pkce().verifier });
  t.equal(res.statusCode, 400);
  t.equal(res.json().error, "invalid_grant", "wrong verifier");
  t.equal((await exchange(code)).json().error, "invalid_grant", "a code that failed once is spent");

  code = await newCode();
  t.equal(
    (await exchange(code, { redirect_uri: "http://127.0.0.1:7777/other" })).json().error,
    "invalid_grant",
  );
  code = await newCode();
  const other = await registerClient(s.app);
  t.equal(
    (await exchange(code, { client_id: other.client_id })).json().error,
    "invalid_grant",
    "another client",
  );
  t.equal((await exchange(code, { code_verifier: "" })).json().error, "invalid_request", "no verifier");

  code = await newCode();
  const first = await exchange(code);
  t.equal(first.statusCode, 200);
  const reuse = await exchange(code);
  t.equal(reuse.json().error, "invalid_grant", "reused code");
  await t.rejects(
    verifyAccessToken(s.ctx, first.json().access_token),
    /revoked/,
    "and what it gave is revoked",
  );

  code = await newCode();
  const real = s.ctx.now;
  s.ctx.now = () => new Date(Date.now() + 61_000);
  t.equal((await exchange(code)).json().error, "invalid_grant", "expired code (60 s)");
  s.ctx.now = real;
});

t.test("access tokens: expiry, audience, signature", async (t) => {
  const s = await setup(t);
  const { tokens } = await signedInTokens(s);
  const at = tokens.access_token as string;
  const real = s.ctx.now;
  s.ctx.now = () => new Date(Date.now() + 901_000);
  await t.rejects(verifyAccessToken(s.ctx, at), /expired/, "expired token");
  s.ctx.now = real;
  const [h, p, sig] = at.split(".") as [string, string, string];
  const claims = JSON.parse(Buffer.from(p, "base64url").toString());
  const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: "someone-else" })).toString("base64url")}.${sig}`;
  await t.rejects(verifyAccessToken(s.ctx, forged), /not valid/, "tampered claims");
  // A token for another audience, validly signed by this server, is refused.
  const other = await testApp(t, { env: { PUBLIC_URL: "http://127.0.0.1:9999" } });
  await t.rejects(verifyAccessToken(other.ctx, at), /not (for|valid)/, "wrong audience or issuer");
});

t.test("refresh tokens rotate; reusing a rotated one revokes the grant", async (t) => {
  const s = await setup(t);
  const { tokens } = await signedInTokens(s);
  const refresh = (rt: string) =>
    tokenRequest(s.app, { grant_type: "refresh_token", refresh_token: rt, client_id: s.client.client_id });
  const second = await refresh(tokens.refresh_token as string);
  t.equal(second.statusCode, 200);
  t.not(second.json().refresh_token, tokens.refresh_token, "a new refresh token each time");
  const third = await refresh(second.json().refresh_token);
  t.equal(third.statusCode, 200);
  const replay = await refresh(tokens.refresh_token as string);
  t.equal(replay.json().error, "invalid_grant", "a rotated token presented again");
  t.equal(
    (await refresh(third.json().refresh_token)).json().error,
    "invalid_grant",
    "the whole grant is revoked",
  );
  await t.rejects(verifyAccessToken(s.ctx, third.json().access_token), /revoked/, "its access tokens too");
  const foreign = await registerClient(s.app);
  const fresh = await signedInTokens(s);
  const wrongClient = await tokenRequest(s.app, {
    grant_type: "refresh_token",
    refresh_token: fresh.tokens.refresh_token as string,
    client_id: foreign.client_id,
  });
  t.equal(wrongClient.json().error, "invalid_grant", "bound to its client");
});

t.test("revocation (RFC 7009) of refresh and access tokens; revoking a user's access", async (t) => {
  const s = await setup(t);
  const revoke = (token: string) =>
    s.app.inject({
      method: "POST",
      url: "/oauth/revoke",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      payload: new URLSearchParams({ token, client_id: s.client.client_id }).toString(),
    });
  const a = await signedInTokens(s);
  t.equal((await revoke(a.tokens.refresh_token as string)).statusCode, 200);
  await t.rejects(verifyAccessToken(s.ctx, a.tokens.access_token as string), /revoked/);
  const b = await signedInTokens(s);
  t.equal((await revoke(b.tokens.access_token as string)).statusCode, 200);
  const refreshed = await tokenRequest(s.app, {
    grant_type: "refresh_token",
    refresh_token: b.tokens.refresh_token as string,
    client_id: s.client.client_id,
  });
  t.equal(refreshed.json().error, "invalid_grant", "revoking the access token ends its refresh token too");
  t.equal((await revoke("not-a-token")).statusCode, 200, "unknown tokens: 200 all the same");

  const c = await signedInTokens(s);
  t.ok(await verifyAccessToken(s.ctx, c.tokens.access_token as string));
  const out = await revokeUserAccess(s.ctx, s.userId);
  t.ok(out.grants >= 1 && out.sessions >= 1);
  await t.rejects(verifyAccessToken(s.ctx, c.tokens.access_token as string), /revoked/, "revoked access");

  const d = await signedInTokens(s);
  await s.ctx.stores.db.query("DELETE FROM users WHERE id = $1", [s.userId]).catch(async () => {
    // users own rows elsewhere; a deleted user is also simulated by their grants going away
    await s.ctx.stores.db.query("DELETE FROM oauth_grants WHERE user_id = $1", [s.userId]);
  });
  forgetGrants(s.ctx);
  await t.rejects(
    verifyAccessToken(s.ctx, d.tokens.access_token as string),
    /revoked/,
    "a deleted user's tokens stop",
  );
});

t.test("token endpoint errors use the RFC codes", async (t) => {
  const s = await setup(t);
  t.equal((await tokenRequest(s.app, { grant_type: "password" })).json().error, "unsupported_grant_type");
  t.equal((await tokenRequest(s.app, {})).json().error, "invalid_request");
  t.equal((await tokenRequest(s.app, { grant_type: "authorization_code" })).json().error, "invalid_request");
  t.equal(
    (
      await tokenRequest(s.app, {
        grant_type: "authorization_code",
        code: "nope",
        client_id: s.client.client_id,
        code_verifier: pkce().verifier,
        redirect_uri: REDIRECT,
      })
    ).json().error,
    "invalid_grant",
  );
});

t.test("sign-in: CSRF, cookie flags, no enumeration, failures limited", async (t) => {
  const s = await setup(t);
  const browser = new Browser(s.app);
  const page = await browser.get("/signin?return_to=/oauth/authorize");
  t.match(page.body, /name="email"/);
  t.match(page.body, /name="password"/);
  t.equal(page.headers["x-frame-options"], "DENY");
  const fields = formFields(page.body);

  const noCsrf = await browser.post("/signin", { email: s.user.email, password: s.user.password });
  t.equal(noCsrf.statusCode, 403, "a form without its CSRF token is refused");

  const wrongPw = await browser.post("/signin", {
    ...fields,
    email: s.user.email,
    password: "wrong password",
  });
  const noUser = await browser.post("/signin", {
    ...formFields(wrongPw.body),
    email: "nobody@example.com",
    password: "wrong password",
  });
  t.equal(wrongPw.statusCode, 401);
  t.equal(noUser.statusCode, 401);
  const msg = (b: string) => /class="error"[^>]*>([^<]*)</.exec(b)?.[1];
  t.equal(msg(wrongPw.body), msg(noUser.body), "the same message whether or not the account exists");

  const ok = await browser.post("/signin", {
    ...formFields(noUser.body),
    email: s.user.email,
    password: s.user.password,
  });
  t.equal(ok.statusCode, 303);
  const setCookie = ([] as string[])
    .concat(ok.headers["set-cookie"] ?? [])
    .find((c) => c.startsWith("vigil_session="));
  t.match(setCookie, /HttpOnly/i);
  t.match(setCookie, /SameSite=Lax/i);
  t.notMatch(setCookie, /Secure/i, "Secure off only for http on a loopback host");
  t.equal(ok.headers.location, "/oauth/authorize", "back where it came from");
  const evil = await new Browser(s.app).get("/signin?return_to=//evil.example/x");
  t.match(formFields(evil.body).return_to, /^\/$/, "never back to another site");

  const attacker = new Browser(s.app);
  let res = await attacker.get("/signin");
  for (let i = 0; i < 5; i++)
    res = await attacker.post("/signin", {
      ...formFields(res.body),
      email: s.user.email,
      password: `guess ${i}`,
    });
  res = await attacker.post("/signin", {
    ...formFields(res.body),
    email: s.user.email,
    password: s.user.password,
  });
  t.equal(res.statusCode, 429, "after 5 failures even the right password waits");
  t.ok(res.headers["retry-after"]);
});

t.test("Secure cookies behind https", async (t) => {
  const ta = await testApp(t, { env: { PUBLIC_URL: "https://vigil.example.com" } });
  await createUser(ta.ctx.stores.db, { email: "b@example.com", password: "another good one" });
  const browser = new Browser(ta.app);
  const page = await browser.get("/signin");
  const res = await browser.post("/signin", {
    ...formFields(page.body),
    email: "b@example.com",
    password: "another good one",
  });
  const cookie = ([] as string[])
    .concat(res.headers["set-cookie"] ?? [])
    .find((c) => c.startsWith("vigil_session="));
  t.match(cookie, /Secure/);
});

t.test("vigil admin mcp-token and revoke-access", async (t) => {
  const s = await setup(t);
  const deps = {
    db: s.ctx.stores.db,
    credentials: s.ctx.credentials,
    secrets: s.ctx.secrets,
    publicUrl: PUBLIC,
    now: () => s.ctx.now(),
  };
  const minted = (await runAdmin(deps, { command: "mcp-token", options: { user: s.userId } })) as Record<
    string,
    string
  >;
  t.match(minted, { token_type: "Bearer", client_id: /^vgc_/ });
  const actor = await verifyAccessToken(s.ctx, minted.access_token as string);
  t.equal(actor.userId, s.userId, "a token for the user, valid at /mcp");
  const refreshed = await tokenRequest(s.app, {
    grant_type: "refresh_token",
    refresh_token: minted.refresh_token as string,
    client_id: minted.client_id as string,
  });
  t.equal(refreshed.statusCode, 200, "its refresh token works like any other");
  await t.rejects(runAdmin(deps, { command: "mcp-token", options: { user: "nobody" } }), /no user/);
  const out = await runAdmin(deps, { command: "revoke-access", options: { user: s.userId } });
  t.match(out, { user_id: s.userId, grants: 1 });
  forgetGrants(s.ctx); // the CLI ran apart from this node: its cache expires within 10 s
  await t.rejects(verifyAccessToken(s.ctx, refreshed.json().access_token), /revoked/);
});
