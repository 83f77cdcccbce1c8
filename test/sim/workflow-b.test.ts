import t, { type Test } from "tap";
import { RATE_LIMIT_MESSAGE, startWorkflowB } from "../../src/sim/workflow-b.js";

/**
 * The workflow_b simulator against Make's API v2 as src/sim/workflow-b.ts cites it: each test
 * names the behaviour it pins.
 */

const control = (url: string, path: string, body: unknown, method = "POST") =>
  fetch(`${url}/__sim/${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

const auth = { authorization: "Token tok" };

interface Log {
  imtId: string;
  id: string;
  status: number;
  timestamp: string;
  duration: number;
  operations: number;
  transfer: number;
  type: string;
  error?: { name: string; message: string; causeModule: { name: string; appName: string } };
}
interface LogPage {
  scenarioLogs: Log[];
  pg: { sortBy: string; sortDir: string; last: string | null; showLast: boolean; limit: number };
}

async function start(t: Test, opts: Parameters<typeof startWorkflowB>[0] = {}) {
  const sim = await startWorkflowB({ apiToken: "tok", teamId: "7", rateLimitPerMinute: 0, ...opts });
  t.teardown(() => sim.close());
  const api = `${sim.url}/eu1/api/v2`;
  const get = (path: string, headers: Record<string, string> = auth) => fetch(`${api}${path}`, { headers });
  const json = async <T>(path: string) => {
    const r = await get(path);
    t.equal(r.status, 200, `GET ${path}`);
    return (await r.json()) as T;
  };
  return { sim, api, get, json };
}

t.test("auth: Token header; anything else is 401 with the error envelope", async (t) => {
  const { sim, get } = await start(t);
  const envelope = { detail: "Invalid token.", message: "Unauthorized", code: "SC401" };
  for (const headers of [{}, { authorization: "Token bad" }, { authorization: "Bearer tok" }] as Record<
    string,
    string
  >[]) {
    const r = await get("/users/me", headers);
    t.equal(r.status, 401, JSON.stringify(headers));
    t.same(await r.json(), envelope);
  }
  t.equal((await get("/users/me")).status, 200);
  t.equal(
    (await fetch(`${sim.url}/api/v2/users/me`, { headers: auth })).status,
    200,
    "answers without a region prefix too",
  );
  await control(sim.url, "state", { fault: "bad_credentials" });
  const bad = await get("/users/me");
  t.equal(bad.status, 401, "bad_credentials fault");
  t.same(await bad.json(), envelope);
});

t.test("users/me: the docs example's fields under authUser", async (t) => {
  const { json } = await start(t);
  const me = await json<{ authUser: Record<string, unknown> }>("/users/me");
  t.match(me.authUser, {
    id: Number,
    name: String,
    email: String,
    language: "en",
    timezoneId: Number,
    localeId: Number,
    countryId: Number,
    features: Object,
    avatar: String,
    timezone: String,
    locale: String,
    emailNotifications: null,
  });
});

t.test("scenarios: teamId xor organizationId, integer params, pages sorted by id desc", async (t) => {
  const { sim, get, json } = await start(t);
  const bad = async (q: string, detail: string) => {
    const r = await get(`/scenarios${q}`);
    t.equal(r.status, 400, q);
    t.same(await r.json(), { detail, message: "Bad Request", code: "SC400" }, q);
  };
  await bad("", "Missing required parameter teamId or organizationId");
  await bad("?teamId=7&organizationId=1", "teamId and organizationId cannot be used together");
  await bad("?teamId=seven", "Invalid key, not parsable to integer");
  await bad("?teamId=7&pg%5Blimit%5D=ten", "Invalid key, not parsable to integer");
  await bad("?teamId=7&pg[offset]=1.5", "Invalid key, not parsable to integer");

  type Scen = { id: number; name: string; teamId: number };
  type ScenPage = { scenarios: Scen[]; pg: Record<string, unknown> };
  const first = await json<ScenPage>("/scenarios?teamId=7");
  t.same(
    first.scenarios.map((s) => s.id),
    [102, 101],
    "sorted by id, descending",
  );
  t.same(first.pg, { sortBy: "id", sortDir: "desc", offset: 0, limit: 10 }, "default limit 10");
  t.match(first.scenarios[0], {
    id: 102,
    name: "Simulated scenario B",
    teamId: 7,
    isActive: true,
    islinked: true,
    isPaused: false,
    isinvalid: false,
    lastEdit: String,
    scheduling: { type: String },
    dlqCount: 0,
    createdByUser: Object,
  });

  const added = await control(sim.url, "scenarios", { count: 12, name: "Bulk" });
  t.equal(added.status, 201);
  const made = ((await added.json()) as { scenarios: Scen[] }).scenarios;
  t.same(
    made.map((s) => s.id),
    Array.from({ length: 12 }, (_, i) => 103 + i),
    "numeric ids, after the last",
  );
  t.equal(made[0]?.name, "Bulk 1");
  const defaultPage = await json<ScenPage>("/scenarios?teamId=7");
  t.equal(defaultPage.scenarios.length, 10, "10 by default");
  t.equal(defaultPage.scenarios[0]?.id, 114);

  const ids: number[] = [];
  for (let offset = 0; ; offset += 5) {
    const p = await json<ScenPage>(`/scenarios?teamId=7&pg%5Boffset%5D=${offset}&pg%5Blimit%5D=5`);
    t.same(p.pg, { sortBy: "id", sortDir: "desc", offset, limit: 5 });
    ids.push(...p.scenarios.map((s) => s.id));
    if (p.scenarios.length < 5) break;
  }
  t.equal(ids.length, 14, "every scenario once (URL-encoded brackets)");
  t.same(
    ids,
    [...ids].sort((a, b) => b - a),
  );
  const plain = await json<ScenPage>("/scenarios?teamId=7&pg[offset]=13&pg[limit]=5");
  t.same(
    plain.scenarios.map((s) => s.id),
    [101],
    "plain brackets too",
  );
  t.equal((await json<ScenPage>("/scenarios?organizationId=1&pg[limit]=100")).scenarios.length, 14);
  t.same((await json<ScenPage>("/scenarios?teamId=8")).scenarios, [], "another team's: none");

  const renamed = await control(sim.url, "scenarios/101", { name: "Renamed" }, "PATCH");
  t.equal(renamed.status, 200);
  const after = await json<ScenPage>("/scenarios?teamId=7&pg[limit]=100");
  t.equal(after.scenarios.find((s) => s.id === 101)?.name, "Renamed");
  t.equal((await control(sim.url, "scenarios/999", { name: "x" }, "PATCH")).status, 404);
  t.equal((await control(sim.url, "scenarios/101", { name: 3 }, "PATCH")).status, 400);
  t.equal(sim.scenarios.length, 14, "the exported list follows the control API");
});

t.test("logs: shape, imtId desc, default limit 50, errors on warnings and failures", async (t) => {
  const { sim, get, json } = await start(t);
  await control(sim.url, "logs", { scenarioId: 101, count: 1, status: 1 });
  await control(sim.url, "logs", { scenarioId: 101, count: 1, status: 2 });
  const made = await control(sim.url, "logs", { scenarioId: 101, count: 1, status: 3, type: "manual" });
  t.equal(made.status, 201);
  const [failedId] = ((await made.json()) as { executionIds: string[] }).executionIds;

  const page = await json<LogPage>("/scenarios/101/logs");
  t.same(
    page.scenarioLogs.map((l) => l.status),
    [3, 2, 1],
    "newest first",
  );
  t.same(page.pg, {
    sortBy: "imtId",
    sortDir: "desc",
    last: page.scenarioLogs[2]?.imtId,
    showLast: false,
    limit: 50,
  });
  const [failed, warned, ok] = page.scenarioLogs as [Log, Log, Log];
  t.equal(failed.id, failedId);
  t.match(failed.id, /^[0-9a-f]{32}$/, "execution id: 32 lowercase hex");
  t.equal(failed.imtId, `${Date.parse(failed.timestamp)}_scenario.101.manual.${failed.id}`);
  t.equal(ok.imtId, `${Date.parse(ok.timestamp)}_scenario.101.auto.${ok.id}`);
  t.match(ok, {
    duration: Number,
    operations: Number,
    centicredits: Number,
    transfer: Number,
    organizationId: 1,
    teamId: 7,
    type: "auto",
    authorId: null,
    instant: false,
    status: 1,
  });
  t.notOk("error" in ok, "a success has no error");
  t.match(failed.error, { name: String, message: String, causeModule: { name: String, appName: String } });
  t.match(warned.error, { name: String, message: String, causeModule: { name: String, appName: String } });
  t.match(failed, { type: "manual", authorId: 1, instant: true });

  const one = await json<{ scenarioLog: Log }>(`/scenarios/101/logs/${failed.id}`);
  t.same(one.scenarioLog, failed, "one log by execution id");
  const detail = await json<{ status: string; outputs: unknown; error?: unknown }>(
    `/scenarios/101/executions/${failed.id}`,
  );
  t.same(detail, { status: "ERROR", outputs: {}, error: failed.error });
  t.same(await json(`/scenarios/101/executions/${ok.id}`), { status: "SUCCESS", outputs: {} });
  t.equal((await json<{ status: string }>(`/scenarios/101/executions/${warned.id}`)).status, "WARNING");

  const notFound = async (path: string, detail: string) => {
    const r = await get(path);
    t.equal(r.status, 404, path);
    t.same(await r.json(), { detail, message: "Not Found", code: "SC404" }, path);
  };
  await notFound("/scenarios/999/logs", "Scenario not found.");
  await notFound(`/scenarios/999/logs/${failed.id}`, "Scenario not found.");
  await notFound(`/scenarios/102/logs/${failed.id}`, "Execution not found.");
  await notFound("/scenarios/101/executions/00000000000000000000000000000000", "Execution not found.");

  const empty = await json<LogPage>("/scenarios/102/logs");
  t.same(empty, {
    scenarioLogs: [],
    pg: { sortBy: "imtId", sortDir: "desc", last: null, showLast: false, limit: 50 },
  });
  const r = await get("/scenarios/101/logs?from=yesterday");
  t.equal(r.status, 400);
  t.same(await r.json(), {
    detail: "Invalid key, not parsable to integer",
    message: "Bad Request",
    code: "SC400",
  });
});

t.test("logs: from/to, status filter, pg[last] keyset, pg[showLast], pg[sortDir]", async (t) => {
  const { sim, json } = await start(t);
  await control(sim.url, "logs", { scenarioId: 101, count: 120, status: 1 });
  await control(sim.url, "logs", { scenarioId: 101, count: 5, status: 3 });

  const all: Log[] = [];
  let last: string | null = null;
  let pages = 0;
  do {
    const p: LogPage = await json<LogPage>(
      `/scenarios/101/logs?pg%5Blimit%5D=50${last ? `&pg%5Blast%5D=${encodeURIComponent(last)}` : ""}`,
    );
    pages++;
    all.push(...p.scenarioLogs);
    t.equal(p.pg.last, p.scenarioLogs.at(-1)?.imtId ?? null, "pg.last is the page's last imtId");
    last = p.scenarioLogs.length === 50 ? p.pg.last : null;
  } while (last);
  t.equal(pages, 3);
  t.equal(all.length, 125, "every log once");
  t.equal(new Set(all.map((l) => l.imtId)).size, 125, "imtIds are unique");
  const ms = all.map((l) => Date.parse(l.timestamp));
  t.ok(
    ms.every((m, i) => i === 0 || m < (ms[i - 1] as number)),
    "timestamps strictly decreasing down the list: strictly increasing as written",
  );

  const mid = all[60] as Log;
  const after = await json<LogPage>(
    `/scenarios/101/logs?pg[limit]=2&pg[last]=${encodeURIComponent(mid.imtId)}`,
  );
  t.same(
    after.scenarioLogs.map((l) => l.imtId),
    [all[61]?.imtId, all[62]?.imtId],
    "strictly after the key",
  );
  const withLast = await json<LogPage>(
    `/scenarios/101/logs?pg[limit]=2&pg[showLast]=true&pg[last]=${encodeURIComponent(mid.imtId)}`,
  );
  t.same(
    withLast.scenarioLogs.map((l) => l.imtId),
    [mid.imtId, all[61]?.imtId],
    "pg[showLast] includes the key's row",
  );
  t.equal(withLast.pg.showLast, true);
  const asc = await json<LogPage>("/scenarios/101/logs?pg[limit]=3&pg[sortDir]=asc");
  t.same(
    asc.scenarioLogs.map((l) => l.imtId),
    all
      .slice(-3)
      .reverse()
      .map((l) => l.imtId),
    "ascending on request",
  );
  t.equal(asc.pg.sortDir, "asc");

  const failed = await json<LogPage>("/scenarios/101/logs?status=3");
  t.equal(failed.scenarioLogs.length, 5, "status filter");
  const from = Date.parse((all[9] as Log).timestamp);
  const to = Date.parse((all[2] as Log).timestamp);
  const window = await json<LogPage>(`/scenarios/101/logs?from=${from}&to=${to}`);
  t.same(
    window.scenarioLogs.map((l) => l.imtId),
    all.slice(2, 10).map((l) => l.imtId),
    "from/to (ms) bound the timestamps, both inclusive",
  );
  const future = await json<LogPage>(`/scenarios/101/logs?from=${Date.now() + 60_000}`);
  t.same(future.scenarioLogs, []);
});

t.test("logs: check runs only with showCheckRuns=true", async (t) => {
  const { sim, json } = await start(t);
  await control(sim.url, "logs", { scenarioId: 101, count: 2, status: 1 });
  await control(sim.url, "logs", { scenarioId: 101, count: 3, status: 1, checkRun: true });
  t.equal((await json<LogPage>("/scenarios/101/logs")).scenarioLogs.length, 2, "hidden by default");
  t.equal((await json<LogPage>("/scenarios/101/logs?showCheckRuns=false")).scenarioLogs.length, 2);
  const shown = await json<LogPage>("/scenarios/101/logs?showCheckRuns=true");
  t.equal(shown.scenarioLogs.length, 5);
  t.match(shown.scenarioLogs.slice(0, 3), [
    { operations: 1, transfer: 0, status: 1 },
    { operations: 1, transfer: 0, status: 1 },
    { operations: 1, transfer: 0, status: 1 },
  ]);
});

t.test("running executions: not in /logs until finished; RUNNING on /executions", async (t) => {
  const { sim, get, json } = await start(t);
  await control(sim.url, "logs", { scenarioId: 102, count: 1, status: 1 });
  const r = await control(sim.url, "logs", { scenarioId: 102, count: 2, running: true });
  t.equal(r.status, 201);
  const [a, b] = ((await r.json()) as { executionIds: string[] }).executionIds as [string, string];
  t.equal((await json<LogPage>("/scenarios/102/logs")).scenarioLogs.length, 1, "running ones are not listed");
  t.same(await json(`/scenarios/102/executions/${a}`), { status: "RUNNING", outputs: {} });
  t.equal((await get(`/scenarios/102/logs/${a}`)).status, 404, "no log while running");

  await new Promise((r) => setTimeout(r, 20));
  const done = await control(sim.url, `executions/${a}`, { status: 3 }, "PATCH");
  t.equal(done.status, 200);
  const finished = ((await done.json()) as { scenarioLog: Log }).scenarioLog;
  t.match(finished, { id: a, status: 3, error: { name: String } });
  t.ok(finished.duration >= 20, "duration runs from the start to the finish");
  const listed = await json<LogPage>("/scenarios/102/logs");
  t.equal(listed.scenarioLogs.length, 2, "listed once finished");
  t.ok(listed.scenarioLogs.some((l) => l.id === a && l.status === 3));
  t.notOk(
    listed.scenarioLogs.some((l) => l.id === b),
    "the other still runs",
  );
  t.match(await json(`/scenarios/102/executions/${a}`), { status: "ERROR", error: { causeModule: Object } });

  t.equal(
    (await control(sim.url, `executions/${a}`, { status: 1 }, "PATCH")).status,
    409,
    "already finished",
  );
  t.equal((await control(sim.url, `executions/${b}`, { status: 7 }, "PATCH")).status, 400);
  t.equal((await control(sim.url, "executions/nope", { status: 1 }, "PATCH")).status, 404);
  t.equal((await control(sim.url, "logs", { scenarioId: 999 })).status, 404);
  t.equal((await control(sim.url, "logs", { status: 4 })).status, 400);
  t.ok(sim.add(101, 2, 2), "add() still adds finished runs");
  t.notOk(sim.add(999, 1, 1));
});

t.test("rate limit: per organization per minute, 429 in plain text without Retry-After", async (t) => {
  const { sim, get } = await start(t, { rateLimitPerMinute: undefined });
  t.same(await (await fetch(`${sim.url}/__sim/ratelimit`)).json(), {
    perMinute: 60,
    retryAfter: null,
    windowMs: 60_000,
    used: 0,
  });
  for (let i = 0; i < 60; i++) {
    const r = await get(i % 2 ? "/users/me" : "/scenarios?teamId=7");
    if (r.status !== 200) t.fail(`request ${i + 1}: ${r.status}`);
    await r.arrayBuffer();
  }
  t.equal(
    (await get("/users/me", { authorization: "Token wrong" })).status,
    401,
    "refused tokens are answered",
  );
  const over = await get("/users/me");
  t.equal(over.status, 429, "the 61st request of the minute");
  t.match(over.headers.get("content-type"), /^text\/plain/);
  t.equal(await over.text(), RATE_LIMIT_MESSAGE);
  t.equal(over.headers.get("retry-after"), null, "no Retry-After by default");
  t.equal((await get("/scenarios/101/logs")).status, 429, "every endpoint shares the budget");
  t.equal((await fetch(`${sim.url}/__sim/state`)).status, 200, "the control API is not limited");

  const set = await control(sim.url, "ratelimit", { perMinute: 2, retryAfter: 30, windowMs: 300 });
  t.same(await set.json(), { perMinute: 2, retryAfter: 30, windowMs: 300, used: 0 }, "a fresh window");
  t.equal((await get("/users/me")).status, 200);
  t.equal((await get("/users/me", {})).status, 401, "unauthenticated requests do not count");
  t.equal((await get("/scenarios?teamId=7&organizationId=1")).status, 400, "a 400 counts");
  const limited = await get("/users/me");
  t.equal(limited.status, 429);
  t.equal(limited.headers.get("retry-after"), "30", "Retry-After on request");
  t.equal(await limited.text(), RATE_LIMIT_MESSAGE);
  await new Promise((r) => setTimeout(r, 350));
  t.equal((await get("/users/me")).status, 200, "the window slides on");

  await control(sim.url, "ratelimit", { perMinute: 0 });
  for (let i = 0; i < 80; i++) await (await get("/users/me")).arrayBuffer();
  t.equal((await get("/users/me")).status, 200, "0 is unlimited");
  t.equal((await control(sim.url, "ratelimit", { perMinute: -1 })).status, 400);
  t.equal((await control(sim.url, "ratelimit", { retryAfter: "soon" })).status, 400);
});

t.test("rate limit: set from the options", async (t) => {
  const { get } = await start(t, { rateLimitPerMinute: 1 });
  t.equal((await get("/users/me")).status, 200);
  t.equal((await get("/users/me")).status, 429);
});

t.test("#18 review: an error kept in the execution details only; a scenario whose logs fail", async (t) => {
  const { sim, get, json } = await start(t);
  const error = {
    name: "DataError",
    message: "Invalid IBAN in bundle 3",
    causeModule: { name: "bank:CreatePayment", appName: "bank" },
  };
  const made = await control(sim.url, "logs", {
    scenarioId: 101,
    count: 1,
    status: 3,
    errorInLog: false,
    error,
  });
  const [execId] = ((await made.json()) as { executionIds: string[] }).executionIds;
  const page = await json<LogPage>("/scenarios/101/logs");
  t.notOk("error" in (page.scenarioLogs[0] ?? {}), "the log row has no error object");
  t.notOk("error" in (await json<{ scenarioLog: Log }>(`/scenarios/101/logs/${execId}`)).scenarioLog);
  t.same(
    await json(`/scenarios/101/executions/${execId}`),
    { status: "ERROR", outputs: {}, error },
    "the details have it",
  );

  t.equal((await control(sim.url, "scenarios/102", { logsStatus: 403 }, "PATCH")).status, 200);
  const denied = await get("/scenarios/102/logs");
  t.equal(denied.status, 403);
  t.same(await denied.json(), { detail: "Access denied.", message: "Permission denied", code: "SC403" });
  t.equal((await get("/scenarios/101/logs")).status, 200, "the other scenarios answer");
  t.equal((await control(sim.url, "scenarios/102", { logsStatus: 200 }, "PATCH")).status, 400);
  await control(sim.url, "scenarios/102", { logsStatus: null }, "PATCH");
  t.equal((await get("/scenarios/102/logs")).status, 200, "healed");
});
