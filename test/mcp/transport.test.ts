import t from "tap";
import { mcpTokenFor } from "../helpers/oauth.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";
import { mcpServer } from "./harness.js";
import { TOOL_NAMES } from "../../src/mcp/tools.js";

t.test(
  "/mcp over Streamable HTTP: stateless, POST only, bad requests answered as JSON-RPC errors",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const mcp = await mcpServer(t, ta);
    const auth = { authorization: `Bearer test-user:${w.users.alice.id}` };
    const initialize = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "raw", version: "1" },
      },
    });
    const rpc = (id: number, method: string, params: Record<string, unknown> = {}) =>
      JSON.stringify({ jsonrpc: "2.0", id, method, params });
    const session = { ...auth, "mcp-protocol-version": LATEST_PROTOCOL_VERSION };

    t.test("the SDK client connects, lists and calls; no session is kept", async (t) => {
      const c = await mcp.client(w.users.alice.id);
      t.match(c.getServerVersion(), { name: "vigil" });
      t.ok(c.getServerCapabilities()?.tools, "offers tools");
      t.match(c.getInstructions(), /list_connections/);
      t.equal((await c.listTools()).tools.length, TOOL_NAMES.length);
      const init = await mcp.post(initialize, auth);
      t.equal(init.status, 200);
      t.equal(init.headers.get("mcp-session-id"), null, "stateless: no session id");
      t.match(init.headers.get("content-type"), /application\/json/);
      t.match(await init.json(), { jsonrpc: "2.0", id: 1, result: { serverInfo: { name: "vigil" } } });
      // a request without any initialize before it works: every POST stands alone
      const list = await mcp.post(rpc(2, "tools/list"), session);
      t.equal(list.status, 200);
      t.equal(
        ((await list.json()) as { result: { tools: unknown[] } }).result.tools.length,
        TOOL_NAMES.length,
      );
    });

    t.test("authentication runs before the body is read", async (t) => {
      const none = await mcp.post("{not json", {});
      t.equal(none.status, 401, "no token: the authenticate function's 401, even with a broken body");
      t.match(none.headers.get("www-authenticate"), /^Bearer resource_metadata=/);
      const huge = await mcp.post(`"${"x".repeat(2 * 1024 * 1024)}"`, {});
      t.equal(huge.status, 401, "an oversized body without a token is refused as unauthenticated");
    });

    t.test("a token in the query string is refused with 400", async (t) => {
      for (const q of [`?access_token=test-user:${w.users.alice.id}`, "?access_token=x", "?token=abc"]) {
        const r = await mcp.post(initialize, {}, q);
        t.equal(r.status, 400, q);
        const b = (await r.json()) as { error: { code: number; message: string } };
        t.equal(b.error.code, -32600);
        t.match(b.error.message, /Authorization header/);
      }
      t.equal(mcp.authenticated.filter((u) => u === w.users.alice.id).length, mcp.authenticated.length);
    });

    t.test("malformed JSON and malformed JSON-RPC: parse errors with 400, never a 500", async (t) => {
      for (const body of ["{not json", "", "[1, 2", '{"__proto__": {"x": 1}}']) {
        const r = await mcp.post(body, auth);
        t.equal(r.status, 400, JSON.stringify(body));
        const b = (await r.json()) as { jsonrpc: string; id: null; error: { code: number; message: string } };
        t.match(
          b,
          { jsonrpc: "2.0", id: null, error: { code: -32700, message: /^Parse error/ } },
          JSON.stringify(body),
        );
      }
      for (const body of ['{"hello": "world"}', '{"jsonrpc": "1.0", "id": 1, "method": "x"}', "42", "[]"]) {
        const r = await mcp.post(body, auth);
        t.equal(r.status, 400, body);
        t.match(await r.json(), { jsonrpc: "2.0", error: { code: Number } }, body);
      }
      const unknownMethod = await mcp.post(rpc(7, "resources/delete"), session);
      t.equal(unknownMethod.status, 200);
      t.match(
        await unknownMethod.json(),
        { id: 7, error: { code: -32601 } },
        "unknown method: JSON-RPC error",
      );
      const badParams = await mcp.post(rpc(8, "tools/call", { arguments: {} }), session);
      t.match(
        await badParams.json(),
        { id: 8, error: { code: -32602, message: /^Invalid params for tools\/call: params\.name: / } },
        "tools/call without a name",
      );
      const badCursor = await mcp.post(rpc(11, "tools/list", { cursor: 5 }), session);
      t.match(await badCursor.json(), { id: 11, error: { code: -32602, message: /params\.cursor/ } });
      const unknownTool = await mcp.post(
        rpc(9, "tools/call", { name: "drop_everything", arguments: {} }),
        session,
      );
      t.match(
        await unknownTool.json(),
        { id: 9, result: { isError: true, content: [{ type: "text", text: /drop_everything not found/ }] } },
        "unknown tool: a tool error",
      );
      const wrongArgs = await mcp.post(
        rpc(10, "tools/call", { name: "list_anomalies", arguments: [1, 2] }),
        session,
      );
      t.equal(wrongArgs.status, 200);
      t.match(
        await wrongArgs.json(),
        { id: 10, error: { code: -32602, message: /params\.arguments/ } },
        "arguments that are not an object",
      );
      for (const type of ["text/plain", "application/xml"]) {
        const r = await mcp.post("hello", { ...auth, "content-type": type });
        t.equal(r.status, 415, type);
        t.match(await r.json(), { jsonrpc: "2.0", error: { message: /application\/json/ } }, type);
      }
    });

    t.test("an oversized body: 413 as a JSON-RPC error", async (t) => {
      const big = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "list_connections", arguments: { pad: "x".repeat(1024 * 1024) } },
      });
      const r = await mcp.post(big, auth);
      t.equal(r.status, 413);
      t.match(await r.json(), {
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: /at most 1048576 bytes/ },
      });
      const justUnder = JSON.stringify({
        jsonrpc: "2.0",
        id: 3,
        method: "tools/list",
        params: { pad: "x".repeat(1000 * 1000) },
      });
      const ok = await mcp.post(justUnder, session);
      t.equal(ok.status, 200, "a body under 1 MiB is read");
    });

    t.test("GET and DELETE: 405 with Allow, no event stream and no sessions", async (t) => {
      for (const method of ["GET", "DELETE", "PUT"]) {
        const r = await fetch(mcp.url, { method, headers: { ...auth, accept: "text/event-stream" } });
        t.equal(r.status, 405, method);
        t.equal(r.headers.get("allow"), "POST", method);
        t.match(await r.json(), { jsonrpc: "2.0", error: { message: /POST only/ } });
        const anonymous = await fetch(mcp.url, { method, headers: { accept: "text/event-stream" } });
        t.equal(anonymous.status, 401, `${method} without a token: 401 first`);
        const query = await fetch(`${mcp.url}?access_token=x`, { method });
        t.equal(query.status, 400, `${method} with a token in the query string`);
      }
      const sse = await fetch(mcp.url.replace(/\/mcp$/, "/sse"), { headers: auth });
      t.equal(sse.status, 404, "the legacy SSE transport is not offered");
    });

    t.test("a notification alone is accepted with 202", async (t) => {
      const r = await mcp.post(
        JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
        session,
      );
      t.equal(r.status, 202);
    });
  },
);

t.test(
  "mounted on the real app: its error handler and hooks leave /mcp's JSON-RPC answers alone",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    // the real app: /mcp mounted the way the server wires it, with a real OAuth access token
    const app = ta.app;
    const token = await mcpTokenFor(ta.app, ta.ctx, w.users.carol.id);
    const headers = {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
    };
    const post = (payload: string, extra: Record<string, string> = {}) =>
      app.inject({ method: "POST", url: "/mcp", headers: { ...headers, ...extra }, payload });

    const list = await post(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "list_connections" } }),
      { "x-request-id": "req-mcp-1" },
    );
    t.equal(list.statusCode, 200);
    t.equal(list.headers["x-request-id"], "req-mcp-1", "the app's request id goes out with the answer");
    t.match(list.json(), { id: 1, result: { structuredContent: { connections: [{ id: w.conns.PC }] } } });
    const broken = await post("{nope");
    t.equal(broken.statusCode, 400);
    t.match(broken.json(), { jsonrpc: "2.0", error: { code: -32700 } });
    const big = await post(JSON.stringify({ pad: "x".repeat(1024 * 1024 + 10) }));
    t.equal(big.statusCode, 413);
    t.match(big.json(), { jsonrpc: "2.0", error: { code: -32600 } });
    const anonymous = await app.inject({ method: "POST", url: "/mcp", payload: "{}" });
    t.equal(anonymous.statusCode, 401);
    const key = await app.inject({
      method: "POST",
      url: "/mcp",
      headers: { ...headers, authorization: `Bearer ${w.keys.carolPersonal}` },
      payload: "{}",
    });
    t.equal(key.statusCode, 401, "a REST API key is not a sign-in here (the authenticate function decides)");
    const rest = await call(app, w.keys.carolPersonal, "GET", "/v1/connections");
    t.equal(rest.statusCode, 200, "REST routes are unaffected");
  },
);
