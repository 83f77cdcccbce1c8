import t from "tap";
import { startWorkflowA } from "../../src/sim/workflow-a.js";

/**
 * `vigil sim workflow_a` answers as a real n8n 1.123.81 did when we drove one (2026-11-24,
 * SQLite, public API key): the field lists, error bodies and listing rules below were copied
 * from its answers. The same behaviours are checked against a live n8n by the contract suite
 * (test/platforms, `npm run test:platforms`).
 */

const LIST_KEYS = [
  "id",
  "finished",
  "mode",
  "retryOf",
  "retrySuccessId",
  "status",
  "startedAt",
  "stoppedAt",
  "workflowId",
  "waitTill",
];
const SINGLE_KEYS = [
  "id",
  "finished",
  "mode",
  "retryOf",
  "retrySuccessId",
  "status",
  "createdAt",
  "startedAt",
  "stoppedAt",
  "deletedAt",
  "workflowId",
  "waitTill",
];

t.test("n8n's public API as observed", async (t) => {
  const sim = await startWorkflowA({ apiKey: "k" });
  t.teardown(() => sim.close());
  const control = (path: string, body: unknown, method = "POST") =>
    fetch(`${sim.url}/__sim/${path}`, {
      method,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const get = async (path: string, key: string | null = "k") => {
    const r = await fetch(`${sim.url}${path}`, { headers: key ? { "X-N8N-API-KEY": key } : {} });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  type Page = { data: Record<string, unknown>[]; nextCursor: string | null };

  await control("executions", { count: 3, status: "success" }); // 1..3
  await control("executions", { count: 1, status: "running" }); // 4
  await control("executions", { count: 1, status: "waiting" }); // 5
  await control("executions", { count: 1, status: "crashed" }); // 6
  await control("executions", { count: 1, status: "error", error: "Boom", node: "Throw Error" }); // 7

  await t.test("list: fields, string ids, newest first, open runs left out", async (t) => {
    const { body } = await get("/api/v1/executions");
    const page = body as unknown as Page;
    t.same(Object.keys(page.data[0] ?? {}), LIST_KEYS, "exactly n8n's keys, in its order");
    t.same(
      page.data.map((e) => e.id),
      ["7", "6", "3", "2", "1"],
      "running (4) and waiting (5) are not listed",
    );
    t.equal(typeof page.data[0]?.id, "string");
    t.equal(page.data.find((e) => e.id === "1")?.finished, true, "finished only for success");
    t.equal(page.data.find((e) => e.id === "7")?.finished, false);
    const running = (await get("/api/v1/executions?status=running")).body as unknown as Page;
    t.same(
      running.data.map((e) => e.id),
      ["4"],
    );
    const waiting = (await get("/api/v1/executions?status=waiting")).body as unknown as Page;
    t.same(waiting.data, [], "waiting runs are hidden even from status=waiting");
    const errors = (await get("/api/v1/executions?status=error")).body as unknown as Page;
    t.same(
      errors.data.map((e) => e.status),
      ["error", "crashed"],
      "status=error includes crashed runs",
    );
  });

  await t.test("cursor: base64 of {lastId, limit}; its limit wins; no dangling cursor", async (t) => {
    const first = (await get("/api/v1/executions?limit=2")).body as unknown as Page;
    t.same(JSON.parse(Buffer.from(first.nextCursor ?? "", "base64").toString()), { lastId: "6", limit: 2 });
    const second = (
      await get(`/api/v1/executions?limit=5&cursor=${encodeURIComponent(first.nextCursor ?? "")}`)
    ).body as unknown as Page;
    t.same(
      second.data.map((e) => e.id),
      ["3", "2"],
      "the cursor's limit, not the query's",
    );
    const third = (await get(`/api/v1/executions?cursor=${encodeURIComponent(second.nextCursor ?? "")}`))
      .body as unknown as Page;
    t.same(
      third.data.map((e) => e.id),
      ["1"],
    );
    t.equal(third.nextCursor, null, "the last page has no cursor");
    const big = Buffer.from(JSON.stringify({ lastId: "7", limit: 1000 })).toString("base64");
    t.equal((await get(`/api/v1/executions?cursor=${big}`)).status, 200, "a cursor's limit may pass 250");
    const all = (await get("/api/v1/executions?limit=0")).body as unknown as Page;
    t.equal(all.data.length, 5, "limit=0 lists every run");
  });

  await t.test("bad input: n8n's own messages", async (t) => {
    const cases: [string, number, string][] = [
      ["/api/v1/executions?limit=251", 400, "request/query/limit must be <= 250"],
      ["/api/v1/executions?limit=abc", 400, "request/query/limit must be number"],
      ["/api/v1/executions?cursor=garbage", 400, "An invalid cursor was provided"],
      [
        "/api/v1/executions?status=crashed",
        400,
        "request/query/status must be equal to one of the allowed values: canceled, error, running, success, waiting",
      ],
      ["/api/v1/executions?includeData=maybe", 400, "request/query/includeData must be boolean"],
      ["/api/v1/executions?fields=id", 400, "Unknown query parameter 'fields'"],
      ["/api/v1/executions/abc", 400, "request/params/id must be number"],
      ["/api/v1/executions/99999", 404, "Not Found"],
    ];
    for (const [path, status, message] of cases) t.same(await get(path), { status, body: { message } }, path);
    t.same(await get("/api/v1/executions", null), {
      status: 401,
      body: { message: "'X-N8N-API-KEY' header required" },
    });
    t.same(await get("/api/v1/executions", "wrong"), { status: 401, body: { message: "unauthorized" } });
  });

  await t.test("one run by id: open runs too, createdAt, the failure in includeData", async (t) => {
    t.same(Object.keys((await get("/api/v1/executions/5")).body), SINGLE_KEYS);
    t.equal((await get("/api/v1/executions/4")).body.status, "running");
    const waiting = (await get("/api/v1/executions/5")).body;
    t.equal(waiting.status, "waiting");
    t.ok(waiting.stoppedAt && waiting.waitTill, "a waiting run has stoppedAt (its pause) and waitTill");
    const failed = (await get("/api/v1/executions/7?includeData=true")).body as {
      data: { resultData: { error: { message: string; node: { name: string } }; lastNodeExecuted: string } };
    };
    t.equal(failed.data.resultData.error.message, "Boom");
    t.equal(failed.data.resultData.error.node.name, "Throw Error");
    t.equal(failed.data.resultData.lastNodeExecuted, "Throw Error");
  });

  await t.test("a resume rewrites startedAt and keeps the id and createdAt", async (t) => {
    const before = (await get("/api/v1/executions/5")).body;
    await new Promise((r) => setTimeout(r, 5));
    await control("executions/5", { status: "success" }, "PATCH");
    const after = (await get("/api/v1/executions/5")).body;
    t.not(after.startedAt, before.startedAt);
    t.equal(after.createdAt, before.createdAt);
    t.equal(after.status, "success");
    const listed = (await get("/api/v1/executions")).body as unknown as Page;
    t.ok(
      listed.data.some((e) => e.id === "5"),
      "listed once it ended",
    );
  });

  await t.test(
    "#18 review: a queued run has startedAt null (n8n's ExecutionEntity) until it starts",
    async (t) => {
      await control("executions", { count: 1, status: "new" }); // 8
      const queued = (await get("/api/v1/executions/8")).body;
      t.equal(queued.status, "new");
      t.equal(queued.startedAt, null, "no start yet");
      t.type(queued.createdAt, "string", "createdAt is its only time");
      const running = (await get("/api/v1/executions?status=running")).body as unknown as Page;
      t.equal(
        running.data.find((e) => e.id === "8")?.startedAt,
        null,
        "listed with status=running, no start",
      );
      await control("executions/8", { status: "running" }, "PATCH");
      t.type((await get("/api/v1/executions/8")).body.startedAt, "string", "set when it starts");
    },
  );

  await t.test("workflows come whole; readiness before the API", async (t) => {
    await control("platform", { workflowBytes: 2_000_000 });
    const r = await fetch(`${sim.url}/api/v1/workflows?limit=1`, { headers: { "X-N8N-API-KEY": "k" } });
    t.ok((await r.arrayBuffer()).byteLength > 2_000_000, "the whole Code node, as n8n sends it");
    const small = await fetch(`${sim.url}/api/v1/executions?limit=1`, { headers: { "X-N8N-API-KEY": "k" } });
    t.ok((await small.arrayBuffer()).byteLength < 1000, "the executions list stays small");
    await control("platform", { ready: false });
    t.equal((await fetch(`${sim.url}/healthz`)).status, 200, "health answers while starting");
    t.equal((await fetch(`${sim.url}/healthz/readiness`)).status, 503, "readiness does not");
    t.equal((await get("/api/v1/executions")).status, 404, "the API is not mounted yet");
  });
});
