import net from "node:net";
import t from "tap";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { testApp } from "../helpers/app.js";
import { Browser, formFields } from "../helpers/oauth.js";

/**
 * A stock MCP client, end to end: the official SDK's Client and StreamableHTTPClientTransport
 * with its OAuthClientProvider flow against a listening Vigil. Discovery (401 with
 * resource_metadata, protected resource metadata, authorization server metadata), dynamic
 * registration, PKCE, Vigil's sign-in form and consent page, token exchange, tool calls, and a
 * refresh when the access token has expired.
 */

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });

class TestProvider implements OAuthClientProvider {
  info?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = "";
  authorizationUrl?: URL;
  savedTokens: OAuthTokens[] = [];
  readonly redirectUrl = "http://127.0.0.1:7777/callback";
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "SDK test client",
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
    this.savedTokens.push(tokens);
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

t.test("the SDK's own client signs in with OAuth and calls the tools", async (t) => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const ta = await testApp(t, { env: { PUBLIC_URL: base } });
  await ta.app.listen({ host: "127.0.0.1", port });
  const user = await createUser(ta.ctx.stores.db, {
    email: "grace@example.com",
    password: "a long password",
  });
  const key = await createKey(ta.ctx.stores.db, {
    user: user.id as string,
    permissions: ["connections:write", "connections:read"],
  });
  const created = await ta.app.inject({
    method: "POST",
    url: "/v1/connections",
    headers: { authorization: `Bearer ${key.key}` },
    payload: {
      service_type: "workflow_a",
      service_name: "Grace's n8n",
      base_url: "http://127.0.0.1:1",
      api_key: "k",
    },
  });
  t.equal(created.statusCode, 201);

  const provider = new TestProvider();
  const mcpUrl = new URL(`${base}/mcp`);
  const connect = async () => {
    const client = new Client({ name: "vigil-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
    t.teardown(() => client.close());
    return client;
  };

  // 1. Without a token: 401, discovery, registration, and a URL to send the user to.
  const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
  await t.rejects(new Client({ name: "vigil-test", version: "1.0.0" }).connect(first), /Unauthorized/);
  t.match(provider.info, { client_id: /^vgc_/ }, "registered itself");
  const authUrl = provider.authorizationUrl as URL;
  t.equal(authUrl.origin + authUrl.pathname, `${base}/oauth/authorize`);
  t.equal(authUrl.searchParams.get("code_challenge_method"), "S256");
  t.equal(authUrl.searchParams.get("resource"), `${base}/mcp`, "resource indicator sent");

  // 2. The user signs in and approves, in a browser.
  const browser = new Browser(ta.app);
  let res = await browser.get(authUrl.pathname + authUrl.search);
  t.equal(res.statusCode, 302, "to the sign-in page");
  res = await browser.get(String(res.headers.location));
  res = await browser.post("/signin", {
    ...formFields(res.body),
    email: "grace@example.com",
    password: "a long password",
  });
  res = await browser.get(String(res.headers.location));
  t.match(res.body, /SDK test client/, "the consent page names the client");
  t.match(res.body, /name="decision" value="approve"/);
  res = await browser.post("/oauth/authorize", { ...formFields(res.body), decision: "approve" });
  const back = new URL(String(res.headers.location));
  t.equal(back.origin + back.pathname, provider.redirectUrl);
  const code = back.searchParams.get("code") as string;

  // 3. The client exchanges the code and connects.
  await first.finishAuth(code);
  t.ok(provider.saved?.access_token, "tokens saved");
  t.ok(provider.saved?.refresh_token);
  const client = await connect();
  const tools = await client.listTools();
  t.same(tools.tools.map((x) => x.name).sort(), [
    "get_alert_history",
    "get_connection_health",
    "get_gateway_usage",
    "get_slo_status",
    "list_anomalies",
    "list_connections",
    "list_recent_executions",
  ]);
  t.ok(
    tools.tools.every((x) => x.annotations?.readOnlyHint === true),
    "every tool is read-only",
  );
  const listed = await client.callTool({ name: "list_connections", arguments: {} });
  t.notOk(listed.isError);
  t.match(JSON.stringify(listed.structuredContent), /Grace's n8n/, "the user's own connection");

  // 4. The access token expires: the SDK refreshes it and the call goes through.
  const realNow = ta.ctx.now;
  ta.ctx.now = () => new Date(Date.now() + 16 * 60_000);
  const before = provider.savedTokens.length;
  const client2 = await connect();
  const again = await client2.callTool({ name: "list_connections", arguments: {} });
  t.notOk(again.isError, "works after a refresh");
  t.ok(provider.savedTokens.length > before, "a new token pair was saved");
  t.not(
    provider.saved?.refresh_token,
    provider.savedTokens[before - 1]?.refresh_token,
    "the refresh token rotated",
  );
  ta.ctx.now = realNow;

  // 5. A REST API key is not accepted at /mcp.
  const withKey = await fetch(mcpUrl, {
    method: "POST",
    headers: {
      authorization: `Bearer ${key.key}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  t.equal(withKey.status, 401);
  t.match(withKey.headers.get("www-authenticate"), /error="invalid_token"/);
  t.match(
    withKey.headers.get("www-authenticate"),
    new RegExp(`resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`),
  );
  const none = await fetch(mcpUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  t.equal(none.status, 401);
  t.notMatch(none.headers.get("www-authenticate"), /error=/, "no error code when no token was sent");
});
