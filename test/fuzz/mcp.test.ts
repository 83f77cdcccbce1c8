import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import fc from "fast-check";
import type { FastifyInstance } from "fastify";
import t from "tap";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { TOOL_NAMES } from "../../src/mcp/tools.js";
import { testApp } from "../helpers/app.js";
import { mcpTokenFor } from "../helpers/oauth.js";
import { seedRouteWorld } from "../helpers/route-samples.js";
import {
  allowTime,
  Findings,
  FUZZ_RUNS,
  FUZZ_SEED,
  type JsonSchema,
  printTable,
  progress,
  seedFor,
  Tally,
} from "./harness.js";
import { fromSchema, worldIds } from "./requests.js";
import { jsonText, nested, ODD_PARAM_NAMES, oddText, oddValue } from "./values.js";

/**
 * The MCP tool server at /mcp, fuzzed through the real app (OAuth token, edge rules and all):
 * `tools/call` of every tool with arguments made from its published input schema and mutated
 * (wrong types, bounds, odd text, unknown fields, ids in odd forms, other tenants' ids), odd
 * JSON-RPC envelopes, malformed and oversized bodies, wrong headers. The property: never an HTTP
 * 5xx, never a JSON-RPC internal error (-32603), never a tool's "Internal error" text, a result's
 * structuredContent matching the tool's output schema; afterwards every tool still answers.
 */

interface Tool {
  name: string;
  inputSchema: JsonSchema;
  outputSchema?: object;
}

interface RpcRequest {
  tool: string;
  headers: Record<string, string>;
  payload: string;
  why: string[];
}

/** Statuses the tool server answers (docs/MCP-TOOLS.md): JSON-RPC over POST, errors at the edge. */
const MCP_STATUSES = [200, 202, 400, 401, 403, 404, 405, 406, 413, 415, 429];

const rpc = (id: unknown, method: string, params?: unknown) =>
  ({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }) as Record<string, unknown>;

function post(app: FastifyInstance, token: string, payload: string, headers: Record<string, string> = {}) {
  return app.inject({
    method: "POST",
    url: "/mcp",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
      ...headers,
    },
    payload,
  });
}

/** The tool's answer: the JSON-RPC response, or the problems with the HTTP exchange. */
function check(status: number, body: string, secrets: string[]): { problems: string[]; rpc: unknown } {
  const problems: string[] = [];
  if (status >= 500) problems.push(`answered ${status}`);
  if (!MCP_STATUSES.includes(status))
    problems.push(`answered ${status}, not a status the tool server documents`);
  let parsed: unknown;
  if (status !== 202) {
    try {
      parsed = JSON.parse(body);
    } catch {
      problems.push(`the body is not JSON: ${body.slice(0, 200)}`);
    }
  }
  for (const m of Array.isArray(parsed) ? parsed : [parsed]) {
    const msg = m as
      { error?: { code?: number; message?: string }; result?: Record<string, unknown> } | undefined;
    if (msg?.error?.code === -32603)
      problems.push(`a JSON-RPC internal error: ${msg.error.message?.slice(0, 200)}`);
    const result = msg?.result as
      | {
          isError?: boolean;
          content?: { type: string; text?: string }[];
          structuredContent?: unknown;
          tool?: string;
        }
      | undefined;
    if (result?.isError) {
      const text = result.content?.[0]?.text ?? "";
      if (/Internal error/i.test(text)) problems.push(`a tool failed inside: ${text.slice(0, 200)}`);
    }
  }
  for (const s of secrets)
    if (s && body.includes(s)) problems.push(`the body holds a credential (${s.slice(0, 8)}…)`);
  return { problems, rpc: parsed };
}

allowTime(t);

t.test(`MCP tools, fuzzed (seed ${FUZZ_SEED}, ${FUZZ_RUNS} runs a tool)`, async (t) => {
  const ta = await testApp(t);
  const { app, ctx } = ta;
  const w = await seedRouteWorld(ta);
  const tokens = {
    alice: await mcpTokenFor(app, ctx, w.users.alice.id as string),
    bob: await mcpTokenFor(app, ctx, w.users.bob.id as string),
    carol: await mcpTokenFor(app, ctx, w.users.carol.id as string),
  };
  const secrets = [...Object.values(w.keys), ...w.secrets];
  const listed = await post(app, tokens.alice, JSON.stringify(rpc(1, "tools/list")));
  t.equal(listed.statusCode, 200, "tools/list answers");
  const tools = (listed.json() as { result: { tools: Tool[] } }).result.tools;
  t.same(tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort(), "every tool is listed");

  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const outputs = new Map(
    tools
      .filter((x) => x.outputSchema)
      .map((x) => {
        const { $schema: _, ...schema } = x.outputSchema as Record<string, unknown>;
        return [x.name, ajv.compile(schema)] as const;
      }),
  );
  const ids = worldIds(w);
  const tally = new Tally();
  const findings = new Findings();

  /** Calls one tool as `who` and checks the answer; returns the parsed JSON-RPC message. */
  const send = async (req: RpcRequest, token: string) => {
    const res = await post(app, token, req.payload, req.headers);
    tally.add(req.tool, res.statusCode);
    const { problems, rpc: parsed } = check(res.statusCode, res.body, secrets);
    const m = parsed as { result?: { structuredContent?: unknown; isError?: boolean } } | undefined;
    const validate = outputs.get(req.tool);
    if (validate && m?.result && !m.result.isError && m.result.structuredContent !== undefined)
      if (!validate(m.result.structuredContent))
        problems.push(
          `structuredContent does not match the output schema: ${JSON.stringify(validate.errors).slice(0, 300)}`,
        );
    for (const p of problems)
      findings.add(
        req.tool,
        p,
        `POST /mcp ${req.payload.slice(0, 500)}\n  mutations: ${req.why.join("; ") || "none"}\n  headers: ${JSON.stringify(req.headers)}\n  answered ${res.statusCode}: ${res.body.slice(0, 500)}\n  - ${p}`,
      );
    return m;
  };

  for (const tool of tools) {
    // connection ids are plain strings in the schema; give them the world's ids (in odd forms too)
    const input: JsonSchema = {
      ...tool.inputSchema,
      properties: Object.fromEntries(
        Object.entries(tool.inputSchema.properties ?? {}).map(([k, v]) => [
          k,
          k === "connection_id" ? { ...v, format: "uuid" } : v,
        ]),
      ),
    };
    const props = Object.keys(input.properties ?? {});
    const args = fc.oneof(
      { weight: 4, arbitrary: fromSchema(input, {}, ids) },
      {
        weight: 4,
        arbitrary: fc
          .tuple(
            fromSchema(input, {}, ids),
            fc.constantFrom(...(props.length ? props : ["x"])),
            fc.oneof(
              oddValue,
              fc.constantFrom(...ids).map((id) => id.toUpperCase()),
            ),
          )
          .map(([a, k, v]) => ({ ...(a as object), [k]: v })),
      },
      {
        weight: 1,
        arbitrary: fc
          .tuple(fromSchema(input, {}, ids), fc.constantFrom(...ODD_PARAM_NAMES), oddValue)
          .map(([a, k, v]) => ({ ...(a as object), [k]: v })),
      },
      { weight: 1, arbitrary: oddValue },
    );
    const envelope = fc.oneof(
      {
        weight: 8,
        arbitrary: fc.constant((a: unknown) => rpc(7, "tools/call", { name: tool.name, arguments: a })),
      },
      {
        weight: 1,
        arbitrary: fc
          .constantFrom<unknown>(null, "x", 0, -1, 2 ** 60, 1.5, {}, [], true, "a".repeat(3000))
          .map((id) => (a: unknown) => rpc(id, "tools/call", { name: tool.name, arguments: a })),
      },
      {
        weight: 1,
        arbitrary: fc
          .oneof(
            oddText,
            fc.constantFrom("tools/list", "initialize", "ping", "resources/list", "tools/call "),
          )
          .map((method) => (a: unknown) => rpc(3, method, { name: tool.name, arguments: a })),
      },
      {
        weight: 1,
        arbitrary: fc.constantFrom<(a: unknown) => unknown>(
          (a) => ({ jsonrpc: "2.0", method: "tools/call", params: { name: tool.name, arguments: a } }), // a notification
          (a) => ({ jsonrpc: "1.0", id: 1, method: "tools/call", params: { name: tool.name, arguments: a } }),
          (a) => [rpc(1, "tools/call", { name: tool.name, arguments: a }), rpc(2, "tools/list")],
          (a) => rpc(1, "tools/call", [tool.name, a]),
          (a) => rpc(1, "tools/call", { name: `${tool.name}\u0000`, arguments: a }),
          (a) => rpc(1, "tools/call", { name: tool.name.toUpperCase(), arguments: a }),
          (a) =>
            rpc(1, "tools/call", {
              name: tool.name,
              arguments: a,
              _meta: { progressToken: nested(40, "object") },
            }),
          () => rpc(1, "tools/call", { name: tool.name, arguments: nested(40, "object") }),
          () => rpc(1, "tools/call", null),
          () => rpc(1, "tools/call"),
        ),
      },
    );
    const raw = fc.oneof(
      { weight: 12, arbitrary: fc.constant<string | null>(null) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          "",
          "{",
          "[]",
          "null",
          "\ufeff{}",
          '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"__proto__":{}}}}',
          `"${"x".repeat(1_100_000)}"`,
        ),
      },
    );
    const headers = fc.oneof(
      { weight: 10, arbitrary: fc.constant<Record<string, string>>({}) },
      {
        weight: 1,
        arbitrary: fc.constantFrom<Record<string, string>>(
          { accept: "application/json" },
          { accept: "text/html" },
          { "content-type": "text/plain" },
          { "content-type": "application/json; charset=utf-16" },
          { "mcp-protocol-version": "1999-01-01" },
          { "mcp-session-id": "not-a-session" },
        ),
      },
    );
    const who = fc.oneof(
      { weight: 4, arbitrary: fc.constant("alice" as const) },
      fc.constantFrom("bob" as const, "carol" as const),
    );
    await fc.assert(
      fc.asyncProperty(args, envelope, raw, headers, who, async (a, wrap, rawBody, hdrs, caller) => {
        const payload = rawBody ?? jsonText(wrap(a));
        const why = [
          `arguments ${jsonText(a).slice(0, 120)}`,
          ...(rawBody !== null ? [`raw body ${JSON.stringify(rawBody.slice(0, 60))}`] : []),
          ...(Object.keys(hdrs).length ? [`headers ${JSON.stringify(hdrs)}`] : []),
          `as ${caller}`,
        ];
        await send({ tool: tool.name, headers: hdrs, payload, why }, tokens[caller]);
        return true;
      }),
      { seed: seedFor(`mcp ${tool.name}`), numRuns: FUZZ_RUNS },
    );
    progress(`mcp: ${tool.name}: ${tally.rows.get(tool.name)?.tried ?? 0} requests`);
  }

  // afterwards every tool still answers for every user, on every connection they can read
  for (const [who, token] of Object.entries(tokens)) {
    const call = (name: string, args: Record<string, unknown> = {}) =>
      send(
        {
          tool: `(reads) ${name}`,
          headers: {},
          payload: JSON.stringify(rpc(1, "tools/call", { name, arguments: args })),
          why: [`as ${who}`],
        },
        token,
      );
    const listedConns = await call("list_connections");
    const conns =
      ((listedConns?.result?.structuredContent ?? {}) as { connections?: { id: string; platform: string }[] })
        .connections ?? [];
    t.ok(conns.length > 0, `${who} still lists connections`);
    for (const c of conns) {
      for (const name of [
        "get_connection_health",
        ...(c.platform === "gateway" ? ["get_gateway_usage"] : []),
        "list_recent_executions",
      ]) {
        const m = await call(name, { connection_id: c.id });
        if (m?.result?.isError)
          findings.add(
            `(reads) ${name}`,
            "a read failed",
            `${who} ${name} ${c.id}: ${JSON.stringify(m.result).slice(0, 300)}`,
          );
      }
    }
    for (const name of ["list_recent_executions", "list_anomalies", "get_alert_history"]) {
      const m = await call(name);
      if (m?.result?.isError)
        findings.add(
          `(reads) ${name}`,
          "a read failed",
          `${who} ${name}: ${JSON.stringify(m.result).slice(0, 300)}`,
        );
    }
  }
  findings.report(t, "mcp");
  printTable(t, "3-mcp", tally.table(`MCP requests tried per tool (seed ${FUZZ_SEED})`));
});
