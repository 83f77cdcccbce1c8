import { randomBytes } from "node:crypto";
import type http from "node:http";
import { type SimState, startSimServer } from "./server.js";

/**
 * A Make account (`workflow_b`), reproducing Make's public API v2 as its documentation, its
 * official SDK and people who called the live API describe it (research notes: each behaviour
 * below cites its source). Sources, abbreviated in the comments:
 *
 * - DOCS: https://developers.make.com/api-documentation/... (full URL on each point).
 * - SDK: integromat/make-typescript-sdk @ 4654ed6975963c069119f60d3c996fc662d2133a (Make's own
 *   SDK; its test/mocks/*.json are copies of the documentation's examples).
 * - COMMUNITY: third-party reports of the live API, not official; labelled as such.
 *
 * Vigil reaches it at `{api}` = a template like `https://{region}.make.com/api/v2`; the simulator
 * answers under `/api/v2/...` and under any one-segment prefix (`/{region}/api/v2/...`), so tests
 * use the template `http://127.0.0.1:PORT/{region}/api/v2`.
 *
 * GET {api}/users/me                                   `{authUser}`
 * GET {api}/scenarios?teamId=|organizationId=&pg[offset]=&pg[limit]=&pg[sortDir]=
 * GET {api}/scenarios/{id}                             `{scenario}`
 * GET {api}/scenarios/{id}/logs?from=&to=&status=&showCheckRuns=&pg[limit]=&pg[last]=&pg[showLast]=&pg[sortDir]=&pg[offset]=
 * GET {api}/scenarios/{id}/logs/{executionId}          `{scenarioLog}`
 * GET {api}/scenarios/{id}/executions/{executionId}    `{status, outputs, error?}`
 * All need `Authorization: Token <api_token>`; every authenticated request spends one of the
 * organization's requests per minute.
 *
 * Control (never faulted, never rate limited):
 * - POST  /__sim/state {fault, latencyMs}                       (server.ts)
 * - POST  /__sim/logs {scenarioId=101, count=1, status=1|2|3, running?, checkRun?, type?,
 *         error?: {name, message, causeModule} | null, errorInLog?: false, duration?, operations?}
 *         -> 201 {ok, executionIds}; `errorInLog: false` leaves the error out of the log rows
 *         while the execution details still carry it
 * - PATCH /__sim/executions/{executionId} {status: 1|2|3}      finishes a running execution
 * - POST  /__sim/scenarios {count=1, name?, teamId?}           -> 201 {scenarios}
 * - PATCH /__sim/scenarios/{id} {name?, logsStatus?: 400..599 | null}  -> 200 {scenario};
 *         `logsStatus` makes that scenario's logs answer the status (a 403 for a missing scope,
 *         say) in Make's error envelope, `null` heals it
 * - GET|POST /__sim/ratelimit {perMinute?, retryAfter?: seconds|null, windowMs?}
 *         -> 200 {perMinute, retryAfter, windowMs, used}; a POST also starts a fresh window.
 */

/** Make's error envelope: "All Make API errors have the same schema" (DOCS http-status-codes). */
interface MakeErrorBody {
  detail: string;
  message: string;
  code: string;
}

export interface MakeError {
  name: string;
  message: string;
  causeModule: { name: string; appName: string };
}

/** A log row exactly as `GET /scenarios/{id}/logs` lists it. */
export interface ScenarioLog {
  imtId: string;
  duration: number;
  operations: number;
  centicredits: number;
  transfer: number;
  organizationId: number;
  teamId: number;
  id: string;
  type: "auto" | "manual";
  authorId: number | null;
  instant: boolean;
  timestamp: string;
  /** 0 = pending (SDK), only while running; such rows are never listed. */
  status: 0 | 1 | 2 | 3;
  error?: MakeError;
}

/** What the simulator keeps about one execution besides its public row. */
interface SimExecution {
  scenarioId: number;
  log: ScenarioLog;
  running: boolean;
  checkRun: boolean;
  startedAt: number;
  /** False: the log rows leave the error out; only the execution details have it. */
  errorInLog: boolean;
}

export interface SimScenario {
  id: number;
  name: string;
  teamId: number;
  hookId: null;
  deviceId: null;
  deviceScope: null;
  concept: boolean;
  description: string;
  folderId: null;
  isinvalid: boolean;
  islinked: boolean;
  isActive: boolean;
  islocked: boolean;
  isPaused: boolean;
  usedPackages: string[];
  lastEdit: string;
  scheduling: { type: string; interval?: number };
  iswaiting: boolean;
  dlqCount: number;
  createdByUser: { id: number; name: string; email: string };
  updatedByUser: { id: number; name: string; email: string };
  nextExec: string | null;
  created: string;
}

export interface AddLogsOptions {
  running?: boolean;
  checkRun?: boolean;
  type?: "auto" | "manual";
  /** Replaces the default error of a warning or failed run; `null` leaves it out. */
  error?: MakeError | null;
  /** False: the error is in the execution details only, not in the log rows. */
  errorInLog?: boolean;
  duration?: number;
  operations?: number;
}

// Rate limit answer, verbatim from DOCS https://developers.make.com/api-documentation/getting-started/rate-limiting
// ("you get error 429 with the message: Requests limit for organization exceeded, please try again later.").
export const RATE_LIMIT_MESSAGE = "Requests limit for organization exceeded, please try again later.";

/** Requests per minute of a Core organization (DOCS .../getting-started/rate-limiting: Core 60, Pro 120, Teams 240, Enterprise 1,000). */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 60;

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: MakeErrorBody,
  ) {
    super(body.detail);
  }
}

// 400s documented for Scenarios, verbatim: DOCS https://developers.make.com/api-documentation/troubleshooting/http-status-codes
// ("teamId and organizationId cannot be used together", "Missing required parameter teamId or
// organizationId", "Invalid key, not parsable to integer"), in the envelope with `SC400`.
const badRequest = (detail: string) => new ApiError(400, { detail, message: "Bad Request", code: "SC400" });
// 404 for a nonexistent scenario or execution: the status is documented (DOCS http-status-codes:
// "when you try to get details of the nonexistent/removed scenario"); the exact body is NOT
// confirmed, this is the likely form (standard envelope with `SC<status>`).
const notFound = (detail: string) => new ApiError(404, { detail, message: "Not Found", code: "SC404" });

const INTEGER = /^-?\d+$/;
/** An integer query parameter; anything else is Make's documented 400. */
function intParam(q: URLSearchParams, key: string): number | undefined {
  const v = q.get(key);
  if (v === null) return undefined;
  if (!INTEGER.test(v.trim())) throw badRequest("Invalid key, not parsable to integer");
  return Number(v.trim());
}
const boolParam = (q: URLSearchParams, key: string) => {
  const v = q.get(key)?.toLowerCase();
  return v === "true" || v === "1";
};
const sortDirParam = (q: URLSearchParams): "asc" | "desc" =>
  q.get("pg[sortDir]")?.toLowerCase() === "asc" ? "asc" : "desc";
const clampLimit = (n: number | undefined, dflt: number) =>
  n === undefined ? dflt : Math.max(1, Math.min(n, 10_000));

/** Order of `imtId`s (`<epoch-ms>_scenario...`): by their milliseconds, then as text. */
function compareImtId(a: string, b: string): number {
  const ms = (s: string) => {
    const m = /^(\d+)/.exec(s);
    return m ? Number(m[1]) : Number.NEGATIVE_INFINITY;
  };
  const d = ms(a) - ms(b);
  if (d !== 0 && Number.isFinite(d)) return d;
  return a < b ? -1 : a > b ? 1 : 0;
}

// Failure details on warning and failed runs. The shape {name, message, causeModule {name,
// appName}} is the SDK's `ExecutionDetail.error` (SDK src/endpoints/executions.ts: "Error
// information when execution resulted in WARNING or ERROR"); that log rows carry it too, and that
// a warning (status 2) can, is COMMUNITY-observed (Sutton spec, find_string id 68860201269, and its
// tests `raw_execution_from()`, id 69021892185). The names `DataError` ("timeout of 40000ms
// exceeded") and `ModuleTimeoutError` are the ones seen there; the module names are illustrative.
const DEFAULT_ERRORS: Record<2 | 3, MakeError> = {
  2: {
    name: "ModuleTimeoutError",
    message: "Module timed out; the scenario went on with the next bundle.",
    causeModule: { name: "http:ActionSendData", appName: "http" },
  },
  3: {
    name: "DataError",
    message: "timeout of 40000ms exceeded",
    causeModule: { name: "http:ActionSendData", appName: "http" },
  },
};

// String statuses of the execution detail endpoint: "RUNNING, SUCCESS, WARNING, ERROR"
// (DOCS https://developers.make.com/api-documentation/api-reference/scenarios/logs, "Get scenario
// execution details"; SDK test/mocks/executions/get-detail.json).
const DETAIL_STATUS = { 1: "SUCCESS", 2: "WARNING", 3: "ERROR" } as const;

export async function startWorkflowB(
  opts: {
    port?: number;
    apiToken?: string;
    teamId?: string;
    organizationId?: string;
    latencyMs?: number;
    /** Requests per minute for the organization; 0 is unlimited. Default 60 (Make's Core plan). */
    rateLimitPerMinute?: number;
  } = {},
) {
  const state: SimState = { fault: "none", latencyMs: opts.latencyMs ?? 0 };
  const apiToken = opts.apiToken ?? "sim-api-token";
  const teamId = opts.teamId ?? "1";
  const organizationId = opts.organizationId ?? "1";
  const user = { id: 1, name: "Sim", email: "sim@workflow-b.example" };
  const created = new Date().toISOString();

  // Scenario objects with the fields of the documentation's "List scenarios" example, plus
  // `isActive` from the newer example (DOCS https://developers.make.com/api-documentation/api-reference/scenarios;
  // SDK test/mocks/scenarios/list.json). Ids are numbers (SDK src/endpoints/scenarios.ts `Scenario`).
  const scenario = (id: number, name: string, team: number): SimScenario => ({
    id,
    name,
    teamId: team,
    hookId: null,
    deviceId: null,
    deviceScope: null,
    concept: false,
    description: "",
    folderId: null,
    isinvalid: false,
    islinked: true,
    isActive: true,
    islocked: false,
    isPaused: false,
    usedPackages: ["http"],
    lastEdit: created,
    scheduling: { type: "indefinitely", interval: 900 },
    iswaiting: false,
    dlqCount: 0,
    createdByUser: user,
    updatedByUser: user,
    nextExec: null,
    created,
  });
  const scenarios: SimScenario[] = [
    scenario(101, "Simulated scenario A", Number(teamId)),
    scenario(102, "Simulated scenario B", Number(teamId)),
  ];
  const executions = new Map<string, SimExecution>();
  /** Scenarios whose logs answer an error (control `logsStatus`). */
  const logFaults = new Map<number, ApiError>();
  const logs = new Map<number, SimExecution[]>(scenarios.map((s) => [s.id, []]));
  /** Newest timestamp handed out per scenario: each new one is at least 1 ms later, so imtIds are unique. */
  const lastTs = new Map<number, number>();

  const addScenarios = (count: number, name?: string, team = Number(teamId)) => {
    const out: SimScenario[] = [];
    let id = scenarios.reduce((max, s) => Math.max(max, s.id), 100);
    for (let i = 0; i < count; i++) {
      id++;
      const s = scenario(
        id,
        name ? (count > 1 ? `${name} ${i + 1}` : name) : `Simulated scenario ${id}`,
        team,
      );
      scenarios.push(s);
      logs.set(id, []);
      out.push(s);
    }
    return out;
  };

  const addLogs = (
    scenarioId: number,
    count: number,
    status: 1 | 2 | 3,
    o: AddLogsOptions = {},
  ): ScenarioLog[] | null => {
    const list = logs.get(scenarioId);
    const scen = scenarios.find((s) => s.id === scenarioId);
    if (!list || !scen) return null;
    const out: ScenarioLog[] = [];
    const now = Date.now();
    for (let i = 0; i < count; i++) {
      const ms = Math.max(o.running ? now : now - (count - i) * 1000, (lastTs.get(scenarioId) ?? 0) + 1);
      lastTs.set(scenarioId, ms);
      const type = o.type ?? "auto";
      // Execution ids are 32 lowercase hex characters (SDK src/endpoints/executions.tools.ts
      // `^[0-9a-f]{32}$`); imtId is `<epoch-ms>_scenario.<scenarioId>.<type>.<executionId>` and its
      // milliseconds are the row's timestamp (DOCS .../api-reference/scenarios-greater-than-logs
      // example: 1632371744497 and 2021-09-23T04:35:44.497Z).
      const id = randomBytes(16).toString("hex");
      // A check run (the trigger found nothing new) shows 1 operation and transfer 0 (COMMUNITY
      // Russian-language notes, find_string id 70174432168).
      const operations = o.checkRun ? 1 : (o.operations ?? 3);
      const log: ScenarioLog = {
        imtId: `${ms}_scenario.${scenarioId}.${type}.${id}`,
        duration: o.duration ?? 800,
        operations,
        // "hundredths of a credit" (SDK `Execution.centicredits`); the examples bill 100 per operation.
        centicredits: operations * 100,
        transfer: o.checkRun ? 0 : 3942,
        organizationId: Number(organizationId),
        teamId: scen.teamId,
        id,
        type,
        // The documentation's examples: an automatic run has no author and is not instant; the
        // manual one has the user as author and is instant (SDK test/mocks/executions/list.json, get.json).
        authorId: type === "manual" ? user.id : null,
        instant: type === "manual",
        timestamp: new Date(ms).toISOString(),
        status: o.running ? 0 : status,
      };
      if (!o.running) setError(log, status, o.error);
      const e: SimExecution = {
        scenarioId,
        log,
        running: !!o.running,
        checkRun: !!o.checkRun,
        startedAt: ms,
        errorInLog: o.errorInLog !== false,
      };
      list.push(e);
      executions.set(id, e);
      out.push(log);
    }
    return out;
  };
  function setError(log: ScenarioLog, status: 1 | 2 | 3, error: MakeError | null | undefined) {
    delete log.error;
    if (status === 1 || error === null) return;
    log.error = error ?? DEFAULT_ERRORS[status];
  }
  /** The original control: `count` finished runs of one status. */
  const add = (scenarioId: number, count: number, status: 1 | 2 | 3) =>
    addLogs(scenarioId, count, status) !== null;
  /** Ends a running execution: it now appears in /logs, with its real duration. */
  const finish = (
    executionId: string,
    status: 1 | 2 | 3,
    error?: MakeError | null,
  ): ScenarioLog | "not_found" | "finished" => {
    const e = executions.get(executionId);
    if (!e) return "not_found";
    if (!e.running) return "finished";
    e.running = false;
    e.log.status = status;
    e.log.duration = Math.max(1, Date.now() - e.startedAt);
    setError(e.log, status, error);
    return e.log;
  };

  // Rate limit: per organization, a budget of requests per minute (DOCS
  // https://developers.make.com/api-documentation/getting-started/rate-limiting; "Wait for one minute
  // for the limit period to reset", DOCS .../troubleshooting/http-status-codes). Kept as a sliding
  // window of the accepted requests' times; refused requests do not count.
  const rateLimit = {
    perMinute: opts.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
    /** Seconds for a `Retry-After` header on 429s; null sends none (the likely real behaviour). */
    retryAfter: null as number | null,
    windowMs: 60_000,
    hits: [] as number[],
  };
  const overLimit = () => {
    if (rateLimit.perMinute <= 0) return false;
    const now = Date.now();
    while (rateLimit.hits.length && (rateLimit.hits[0] as number) <= now - rateLimit.windowMs)
      rateLimit.hits.shift();
    if (rateLimit.hits.length >= rateLimit.perMinute) return true;
    rateLimit.hits.push(now);
    return false;
  };
  const rateLimitView = () => {
    const now = Date.now();
    return {
      perMinute: rateLimit.perMinute,
      retryAfter: rateLimit.retryAfter,
      windowMs: rateLimit.windowMs,
      used: rateLimit.hits.filter((h) => h > now - rateLimit.windowMs).length,
    };
  };

  // server.ts answers whatever a handler returns as JSON. The 429 is plain text, so the platform
  // handler writes it itself, on the response object kept here for each request.
  const responses = new WeakMap<http.IncomingMessage, http.ServerResponse>();
  const sendText = (
    req: http.IncomingMessage,
    status: number,
    text: string,
    headers: Record<string, string>,
  ) => {
    const res = responses.get(req);
    if (!res) return false;
    res.writeHead(status, {
      "content-type": "text/plain; charset=utf-8",
      "content-length": String(Buffer.byteLength(text)),
      ...headers,
    });
    res.end(text);
    // The answer is sent: server.ts's JSON writer, which runs next, must not write again.
    res.writeHead = (() => res) as unknown as typeof res.writeHead;
    res.end = (() => res) as unknown as typeof res.end;
    return true;
  };

  const listLogs = (scenarioId: number, q: URLSearchParams) => {
    const list = logs.get(scenarioId);
    // DOCS .../troubleshooting/http-status-codes: 404 for a nonexistent scenario (body: likely form).
    if (!list) throw notFound("Scenario not found.");
    const from = intParam(q, "from");
    const to = intParam(q, "to");
    const status = intParam(q, "status");
    const limit = clampLimit(intParam(q, "pg[limit]"), 50);
    const offset = Math.max(0, intParam(q, "pg[offset]") ?? 0);
    const sortDir = sortDirParam(q);
    const last = q.get("pg[last]");
    const showLast = boolParam(q, "pg[showLast]");
    const showCheckRuns = boolParam(q, "showCheckRuns");
    const sign = sortDir === "desc" ? -1 : 1;
    const rows = list
      // Runs in progress are not listed: rows are finished runs (they have a `duration`; COMMUNITY
      // rows carry `eventType: "EXECUTION_END"`, Sutton spec find_string id 68860201269). NOT
      // confirmed; the research's most likely reading. `RUNNING` shows only on /executions/{id}.
      .filter((e) => !e.running)
      // Check runs are hidden unless `showCheckRuns=true`: the docs' text says the opposite, but a
      // COMMUNITY user of the live API (find_string id 70174432168) and Make's own UI links
      // (`?showCheckRuns=true`) read it literally; the research's most likely reading.
      .filter((e) => showCheckRuns || !e.checkRun)
      .map((e) => e.log)
      // `from` / `to`: timestamps in milliseconds bounding the logs; `status`: 1 success, 2
      // warning, 3 error (DOCS https://developers.make.com/api-documentation/api-reference/scenarios-greater-than-logs).
      .filter((l) => {
        const ms = Date.parse(l.timestamp);
        return (from === undefined || ms >= from) && (to === undefined || ms <= to);
      })
      .filter((l) => status === undefined || l.status === status)
      .map((l) => (executions.get(l.id)?.errorInLog === false ? withoutError(l) : l))
      // "Returned logs are sorted by imtId in descending order" (DOCS
      // https://developers.make.com/api-documentation/api-reference/scenarios/logs); `pg[sortDir]` turns it.
      .sort((a, b) => sign * compareImtId(a.imtId, b.imtId))
      // `pg[last]`: "The last retrieved key. In response, you get only entries that follow after
      // the key"; `pg[showLast]`: "Include records with last value in the result set" (DOCS
      // .../api-reference/scenarios-greater-than-logs). The key is an imtId (docs pg echo).
      .filter((l) => {
        if (!last) return true;
        const c = sign * compareImtId(l.imtId, last);
        return c > 0 || (showLast && c === 0);
      });
    const page = rows.slice(offset, offset + limit);
    // Response `{scenarioLogs, pg: {sortBy: "imtId", sortDir, last, showLast, limit}}`: keyset paging,
    // no `offset` in the echo, default limit 50 (DOCS .../api-reference/scenarios-greater-than-logs
    // "Successful response"; SDK test/mocks/executions/list.json).
    return {
      scenarioLogs: page.map(publicLog),
      pg: {
        sortBy: "imtId",
        sortDir,
        last: page.length ? (page[page.length - 1] as ScenarioLog).imtId : null,
        showLast,
        limit,
      },
    };
  };

  const listScenarios = (q: URLSearchParams) => {
    // Exactly one of teamId and organizationId (DOCS https://developers.make.com/api-documentation/api-reference/scenarios;
    // the 400 messages: DOCS https://developers.make.com/api-documentation/troubleshooting/http-status-codes).
    const hasTeam = q.has("teamId");
    const hasOrg = q.has("organizationId");
    if (hasTeam && hasOrg) throw badRequest("teamId and organizationId cannot be used together");
    if (!hasTeam && !hasOrg) throw badRequest("Missing required parameter teamId or organizationId");
    const team = intParam(q, "teamId");
    const org = intParam(q, "organizationId");
    // `pg[offset]` / `pg[limit]` (brackets may come URL-encoded, as in the docs' own example;
    // URLSearchParams decodes them): DOCS https://developers.make.com/api-documentation/pagination-sorting-filtering/pagination-and-sorting.
    // The default limit "varies with different resources"; 10 is what the scenarios example echoes.
    const offset = Math.max(0, intParam(q, "pg[offset]") ?? 0);
    const limit = clampLimit(intParam(q, "pg[limit]"), 10);
    const sortDir = sortDirParam(q);
    const sign = sortDir === "desc" ? -1 : 1;
    // A team or organization the token cannot see lists nothing here (the real answer, probably a
    // 403, is not confirmed).
    const mine = scenarios
      .filter((s) => (team !== undefined ? s.teamId === team : String(org) === organizationId))
      // "sorted by proprietary setting in descending order"; the example's echo is sortBy id, desc
      // (DOCS .../api-reference/scenarios, "List scenarios" response).
      .sort((a, b) => sign * (a.id - b.id));
    return {
      scenarios: mine.slice(offset, offset + limit),
      pg: { sortBy: "id", sortDir, offset, limit },
    };
  };

  const api = (path: string, q: URLSearchParams): unknown => {
    // `GET /users/me` `{authUser: {...}}`, the fields of the documentation's example (DOCS
    // https://developers.make.com/api-documentation/api-reference/users/me; SDK test/mocks/users/me.json).
    if (path === "users/me")
      return {
        authUser: {
          ...user,
          language: "en",
          timezoneId: 113,
          localeId: 18,
          countryId: 1,
          features: { allow_apps: true },
          avatar: "https://secure.gravatar.com/avatar/6b1a74d20d925c12a73af32bf0dd7164.jpg?d=mm",
          timezone: "Europe/Prague",
          locale: "cs",
          emailNotifications: null,
        },
      };
    if (path === "scenarios") return listScenarios(q);
    const one = /^scenarios\/(\d+)$/.exec(path);
    if (one) {
      // `GET /scenarios/{id}` `{scenario}` (DOCS .../api-reference/scenarios; SDK test/mocks/scenarios/get.json).
      const s = scenarios.find((x) => x.id === Number(one[1]));
      if (!s) throw notFound("Scenario not found.");
      return { scenario: s };
    }
    const l = /^scenarios\/(\d+)\/logs$/.exec(path);
    if (l) {
      const fault = logFaults.get(Number(l[1]));
      if (fault) throw fault;
      return listLogs(Number(l[1]), q);
    }
    const d = /^scenarios\/(\d+)\/(logs|executions)\/([^/]+)$/.exec(path);
    if (d) {
      if (!logs.has(Number(d[1]))) throw notFound("Scenario not found.");
      const e = executions.get(decodeURIComponent(d[3] ?? ""));
      // Unknown execution: 404 (status documented, body the likely form, as for scenarios).
      if (!e || e.scenarioId !== Number(d[1])) throw notFound("Execution not found.");
      if (d[2] === "logs") {
        // `GET /scenarios/{id}/logs/{executionId}` `{scenarioLog}` (DOCS
        // https://developers.make.com/api-documentation/api-reference/scenarios/logs; SDK
        // test/mocks/executions/get.json). A running execution has no log yet (see listLogs).
        if (e.running) throw notFound("Execution not found.");
        return { scenarioLog: publicLog(e.errorInLog ? e.log : withoutError(e.log)) };
      }
      // `GET /scenarios/{id}/executions/{executionId}` `{status, outputs, error?}` (DOCS
      // .../api-reference/scenarios/logs "Get scenario execution details"; SDK
      // test/mocks/executions/get-detail.json and `ExecutionDetail`: error on WARNING or ERROR).
      if (e.running) return { status: "RUNNING", outputs: {} };
      const status = DETAIL_STATUS[e.log.status as 1 | 2 | 3];
      return { status, outputs: {}, ...(e.log.error ? { error: e.log.error } : {}) };
    }
    throw notFound("Not found.");
  };

  const sim = await startSimServer({
    port: opts.port,
    state,
    platform: (req, url) => {
      // `https://{zone_url}/api/v2/{endpoint}` (DOCS https://developers.make.com/api-documentation/getting-started/api-structure).
      const m = /^(?:\/[^/]+)?\/api\/v2\/(.*)$/.exec(url.pathname);
      if (!m) return [404, { message: "not found" }];
      // `Authorization: Token <api token>` (DOCS https://developers.make.com/api-documentation/authentication);
      // `Bearer` is for OAuth access tokens, not API tokens (COMMUNITY, Russian-language notes).
      // The status and body of a refused token are NOT confirmed: the docs say only "an
      // authentication error"; 401 with this envelope is the research's likely form.
      if (req.headers.authorization !== `Token ${apiToken}` || state.fault === "bad_credentials")
        return [401, { detail: "Invalid token.", message: "Unauthorized", code: "SC401" }];
      if (overLimit()) {
        // Over the budget: 429 with the documented message as a PLAIN TEXT body, not the JSON
        // envelope (COMMUNITY "Ground truth — measured against the live Make API", find_string id
        // 69037045284, §9), and no `Retry-After` (not in the docs; NOT confirmed either way), unless
        // the control API asks for one.
        const headers: Record<string, string> =
          rateLimit.retryAfter !== null ? { "retry-after": String(rateLimit.retryAfter) } : {};
        sendText(req, 429, RATE_LIMIT_MESSAGE, headers);
        return [429, RATE_LIMIT_MESSAGE];
      }
      if (req.method !== "GET") return [404, notFound("Not found.").body];
      try {
        return [200, api(m[1] ?? "", url.searchParams)];
      } catch (err) {
        if (err instanceof ApiError) return [err.status, err.body];
        throw err;
      }
    },
    control: (req, url, body) => {
      const b = (body ?? {}) as Record<string, unknown>;
      if (url.pathname === "/__sim/logs" && req.method === "POST") {
        const status = (b.status ?? 1) as 1 | 2 | 3;
        if (![1, 2, 3].includes(status)) return [400, { error: "status must be 1, 2 or 3" }];
        if (b.type !== undefined && b.type !== "auto" && b.type !== "manual")
          return [400, { error: "type must be auto or manual" }];
        const count = Math.max(1, Math.min(Number(b.count ?? 1) || 1, 10_000));
        const added = addLogs(Number(b.scenarioId ?? 101), count, status, {
          running: b.running === true,
          checkRun: b.checkRun === true,
          type: b.type as "auto" | "manual" | undefined,
          error: b.error as MakeError | null | undefined,
          errorInLog: b.errorInLog !== false,
          duration: typeof b.duration === "number" ? b.duration : undefined,
          operations: typeof b.operations === "number" ? b.operations : undefined,
        });
        if (!added) return [404, { error: "no such scenario" }];
        return [201, { ok: true, executionIds: added.map((l) => l.id) }];
      }
      const ex = /^\/__sim\/executions\/([^/]+)$/.exec(url.pathname);
      if (ex && req.method === "PATCH") {
        const status = b.status as 1 | 2 | 3;
        if (![1, 2, 3].includes(status)) return [400, { error: "status must be 1, 2 or 3" }];
        const r = finish(decodeURIComponent(ex[1] ?? ""), status, b.error as MakeError | null | undefined);
        if (r === "not_found") return [404, { error: "no such execution" }];
        if (r === "finished") return [409, { error: "the execution is not running" }];
        return [200, { scenarioLog: publicLog(r) }];
      }
      if (url.pathname === "/__sim/scenarios" && req.method === "POST") {
        if (b.name !== undefined && typeof b.name !== "string")
          return [400, { error: "name must be a string" }];
        const count = Math.max(1, Math.min(Number(b.count ?? 1) || 1, 10_000));
        const team = b.teamId === undefined ? Number(teamId) : Number(b.teamId);
        if (!Number.isInteger(team)) return [400, { error: "teamId must be an integer" }];
        return [201, { scenarios: addScenarios(count, b.name as string | undefined, team) }];
      }
      const sc = /^\/__sim\/scenarios\/(\d+)$/.exec(url.pathname);
      if (sc && req.method === "PATCH") {
        const s = scenarios.find((x) => x.id === Number(sc[1]));
        if (!s) return [404, { error: "no such scenario" }];
        if (b.logsStatus !== undefined) {
          const st = b.logsStatus;
          if (st !== null && !(typeof st === "number" && Number.isInteger(st) && st >= 400 && st <= 599))
            return [400, { error: "logsStatus must be an HTTP status from 400 to 599, or null" }];
          if (st === null) logFaults.delete(s.id);
          else logFaults.set(s.id, logFault(st));
          if (b.name === undefined) return [200, { scenario: s }];
        }
        if (typeof b.name !== "string" || !b.name) return [400, { error: "name must be a non-empty string" }];
        s.name = b.name;
        s.lastEdit = new Date().toISOString();
        return [200, { scenario: s }];
      }
      if (url.pathname === "/__sim/ratelimit" && req.method === "GET") return [200, rateLimitView()];
      if (url.pathname === "/__sim/ratelimit" && req.method === "POST") {
        const wholeOrNull = (v: unknown) =>
          v === null || (typeof v === "number" && Number.isInteger(v) && v >= 0);
        if (b.perMinute !== undefined && !(typeof b.perMinute === "number" && wholeOrNull(b.perMinute)))
          return [400, { error: "perMinute must be a whole number (0 = unlimited)" }];
        if (b.retryAfter !== undefined && !wholeOrNull(b.retryAfter))
          return [400, { error: "retryAfter must be whole seconds or null" }];
        if (b.windowMs !== undefined && !(typeof b.windowMs === "number" && b.windowMs > 0))
          return [400, { error: "windowMs must be a number > 0" }];
        if (b.perMinute !== undefined) rateLimit.perMinute = b.perMinute as number;
        if (b.retryAfter !== undefined) rateLimit.retryAfter = b.retryAfter as number | null;
        if (b.windowMs !== undefined) rateLimit.windowMs = b.windowMs as number;
        rateLimit.hits = [];
        return [200, rateLimitView()];
      }
      return [404, { error: "no such control route" }];
    },
  });
  // Before server.ts's own listener, so the platform handler can answer in plain text (sendText).
  sim.server.prependListener("request", (req: http.IncomingMessage, res: http.ServerResponse) =>
    responses.set(req, res),
  );
  return Object.assign(sim, { add, addLogs, finish, addScenarios, scenarios, rateLimit });
}

/** A log row without its error object (control `errorInLog: false`). */
function withoutError(l: ScenarioLog): ScenarioLog {
  const copy = { ...l };
  delete copy.error;
  return copy;
}

/**
 * A scenario's logs failing: a 403 is Make's documented answer to a token without the scope
 * (`{"detail":"Access denied.","message":"Permission denied","code":"SC403"}`, DOCS
 * .../authentication/api-scopes-overview), a 400 its documented validation envelope; other
 * statuses take the same envelope with `SC<status>` (the likely form).
 */
function logFault(status: number): ApiError {
  if (status === 403)
    return new ApiError(403, { detail: "Access denied.", message: "Permission denied", code: "SC403" });
  if (status === 400) return badRequest("Invalid key, not parsable to integer");
  return new ApiError(status, { detail: `HTTP ${status}`, message: "Error", code: `SC${status}` });
}

/** A row as the API shows it (a copy, so callers cannot change the simulator's state through it). */
function publicLog(l: ScenarioLog): ScenarioLog {
  return { ...l, ...(l.error ? { error: { ...l.error, causeModule: { ...l.error.causeModule } } } : {}) };
}
