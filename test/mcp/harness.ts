import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import type { Test } from "tap";
import { READ_PERMISSIONS, type UserActor } from "../../src/core/actor.js";
import { registerMcp } from "../../src/mcp/server.js";
import type { TestApp } from "../helpers/app.js";

/**
 * The tool server on a listening Fastify instance of its own, around a test app's context (real
 * stores). Authentication is a stand-in for OAuth: `Authorization: Bearer test-user:<userId>`
 * signs in as that user with the read permissions an OAuth token carries; anything else gets a
 * 401 sent by the authenticate function itself, as the real one does.
 */
export async function mcpServer(t: Test, ta: TestApp) {
  const authenticated: string[] = [];
  const authenticate = async (req: FastifyRequest, reply: FastifyReply): Promise<UserActor | null> => {
    const m = /^Bearer test-user:(\S+)$/.exec(req.headers.authorization ?? "");
    if (!m?.[1]) {
      await reply
        .code(401)
        .header(
          "WWW-Authenticate",
          'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"',
        )
        .send({ error: "unauthorized" });
      return null;
    }
    authenticated.push(m[1]);
    return { type: "user", userId: m[1], via: "oauth", permissions: new Set(READ_PERMISSIONS) };
  };
  const app = Fastify();
  registerMcp(app, ta.ctx, authenticate);
  await app.listen({ host: "127.0.0.1", port: 0 });
  t.teardown(() => app.close());
  const address = app.server.address();
  if (!address || typeof address === "string") throw new Error("no address");
  const url = `http://127.0.0.1:${address.port}/mcp`;

  /** A connected SDK client signed in as `userId`. */
  const client = async (userId: string) => {
    const c = new Client({ name: "vigil-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer test-user:${userId}` } },
    });
    await c.connect(transport);
    t.teardown(() => c.close());
    return c;
  };

  /** A raw POST to /mcp (for what the SDK client would never send). */
  const post = (body: string, headers: Record<string, string> = {}, path = "") =>
    fetch(`${url}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...headers,
      },
      body,
    });

  return { app, url, client, post, authenticated };
}

/** A tool call's structured result; fails the test when the call was a tool error. */
export async function callOk<T = Record<string, unknown>>(
  t: Test,
  c: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<T> {
  const r = (await c.callTool({ name, arguments: args })) as CallToolResult;
  if (r.isError) t.fail(`${name} ${JSON.stringify(args)}: ${JSON.stringify(r.content)}`);
  const text = r.content[0];
  t.same(
    text?.type === "text" ? JSON.parse(text.text) : undefined,
    r.structuredContent,
    `${name}: the text content is a JSON copy of structuredContent`,
  );
  return r.structuredContent as T;
}

/** A tool call that must fail as a tool error: its text. */
export async function callError(
  c: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<string> {
  const r = (await c.callTool({ name, arguments: args })) as CallToolResult;
  if (!r.isError)
    throw new Error(`${name} ${JSON.stringify(args)} succeeded: ${JSON.stringify(r.structuredContent)}`);
  const text = r.content[0];
  return text?.type === "text" ? text.text : "";
}
