import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import fc from "fast-check";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import FindMyWay, { type HTTPMethod } from "find-my-way";
import pg from "pg";
import type { Test } from "tap";
import { MAX_URL_LENGTH } from "../../src/http/edge.js";
import { METRIC_TYPES } from "../../src/http/read-queries.js";
import type { Route } from "../../src/http/route.js";
import { routes } from "../../src/http/routes/index.js";
import type { TestApp } from "../helpers/app.js";
import { requireBackend, TEST_DATABASE_URL, TEST_QUESTDB_PG_URL } from "../helpers/backends.js";
import {
  routeKey,
  routeSamples,
  type RouteWorld,
  sampleHeartbeat,
  type SampleRequest,
} from "../helpers/route-samples.js";
import { type FuzzRequest, routeFuzz } from "./requests.js";

/**
 * The fuzz suite's harness (issue 16): how much it tries (FUZZ_RUNS, FUZZ_SEED), the OpenAPI
 * document as the property reads it, the property every answer must keep (`Checker`), the reads
 * that must keep answering afterwards (`sweep`), the problems found (`Findings`), and the REST
 * run over the whole route table (`fuzzRoutes`). The requests come from requests.ts, the odd
 * values from values.ts; the *.test.ts files of this folder drive it.
 */

// --- how much ---

/**
 * How much the fuzz suite tries: FUZZ_RUNS requests per route (and per tool and form), from
 * FUZZ_SEED. CI runs the defaults (fixed seed, bounded runs, the suite stays near a minute);
 * `npm run fuzz -- --runs N [--seed S]` runs more (scripts/fuzz.mjs).
 */
const int = (v: string | undefined, dflt: number) => {
  const n = v === undefined || v === "" ? dflt : Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`not a whole number: ${v}`);
  return n;
};

export const FUZZ_SEED = int(process.env.FUZZ_SEED, 16_2026);
export const FUZZ_RUNS = int(process.env.FUZZ_RUNS, 40);
/** The pass on PostgreSQL + QuestDB is smaller: those stores are slower, the input rules the same. */
export const FUZZ_BACKEND_RUNS = Math.min(FUZZ_RUNS, Math.max(5, Math.round(FUZZ_RUNS / 4)));

/** A seed of its own for each route (or tool, or form), so adding one does not change the others'. */
export function seedFor(name: string, seed = FUZZ_SEED): number {
  let h = seed | 0;
  for (let i = 0; i < name.length; i++) h = (Math.imul(h, 31) + name.charCodeAt(i)) | 0;
  return h;
}

/**
 * Sets the test file's time limit from the runs it makes: a loaded machine can be several times
 * slower than the minute the defaults take. Left alone when the runner has none (`--timeout=0`).
 */
export function allowTime(t: { setTimeout: (ms: number) => void }, runs = FUZZ_RUNS): void {
  const given = Number(process.env.TAP_TIMEOUT ?? 30);
  if (given > 0) t.setTimeout(Math.max(given * 1000, 120_000 + runs * 5_000));
}

/**
 * Whether PostgreSQL and QuestDB can be used, asked when the test starts with time to answer:
 * the shared probe (helpers/backends.ts) runs while the test file is still loading, and on a
 * loaded machine its 3 s timeout expires with both servers up. When they do not answer here
 * either, `requireBackend` decides (skip, or fail under CI=true).
 */
export async function productionStores(t: Test): Promise<boolean> {
  const answers = async (url: string | undefined) => {
    if (!url) return false;
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 15_000 });
    try {
      await c.connect();
      await c.query("SELECT 1");
      return true;
    } catch {
      return false;
    } finally {
      await c.end().catch(() => {});
    }
  };
  if ((await answers(TEST_DATABASE_URL)) && (await answers(TEST_QUESTDB_PG_URL))) return true;
  return (await requireBackend(t, "postgres")) && (await requireBackend(t, "questdb"));
}

/** A line of progress on stderr, when `npm run fuzz` asks for it (long runs). */
export function progress(line: string): void {
  if (process.env.FUZZ_PROGRESS) process.stderr.write(`fuzz: ${line}\n`);
}

/** Prints a table of requests tried: in the TAP output, and for `npm run fuzz`'s summary. */
export function printTable(t: { comment: (m: string) => void }, name: string, table: string): void {
  t.comment(table);
  const dir = process.env.FUZZ_REPORT_DIR;
  if (dir) writeFileSync(join(dir, `${name}.txt`), `${table}\n`);
}

// --- the document ---

/**
 * The OpenAPI document as the fuzz suite reads it: which statuses an operation documents, and a
 * validator for the body of each (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses; the response
 * schemas close their objects, so an undocumented field fails as well as a missing one). The same
 * approach as test/api/responses.test.ts.
 */

export type JsonSchema = Record<string, unknown> & {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  not?: JsonSchema;
};

export interface Parameter {
  name: string;
  in: "query" | "path";
  required: boolean;
  schema: JsonSchema;
}

interface Operation {
  parameters: Parameter[];
  requestBody?: { content: { "application/json": { schema: JsonSchema } } };
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
}

export interface Doc {
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, Operation["responses"][string]>;
  };
}

export const docPath = (path: string) => path.replace(/:(\w+)/g, "{$1}");

export class Document {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly cache = new Map<string, ValidateFunction | null>();

  constructor(readonly doc: Doc) {
    addFormats.default(this.ajv);
  }

  static async load(app: FastifyInstance): Promise<Document> {
    const res = await app.inject({ method: "GET", url: "/v1/openapi.json" });
    return new Document(res.json() as Doc);
  }

  operation(r: Pick<Route, "method" | "path">): Operation {
    const op = this.doc.paths[docPath(r.path)]?.[r.method.toLowerCase()];
    if (!op) throw new Error(`the document has no operation ${r.method} ${r.path}`);
    return op;
  }

  /** The named schemas every `#/components/schemas/…` reference points at. */
  get schemas(): Record<string, JsonSchema> {
    return this.doc.components.schemas;
  }

  /** The statuses the document lists for an operation. */
  statuses(r: Pick<Route, "method" | "path">): number[] {
    return Object.keys(this.operation(r).responses).map(Number);
  }

  parameters(r: Pick<Route, "method" | "path">, where: "query" | "path"): Parameter[] {
    return this.operation(r).parameters.filter((p) => p.in === where);
  }

  requestBody(r: Pick<Route, "method" | "path">): JsonSchema | undefined {
    return this.operation(r).requestBody?.content["application/json"].schema;
  }

  /** A validator for the body the document gives for this status, or null when it gives none. */
  validator(r: Pick<Route, "method" | "path">, status: number): ValidateFunction | null {
    const key = `${r.method} ${r.path} ${status}`;
    let v = this.cache.get(key);
    if (v === undefined) {
      let answer = this.operation(r).responses[String(status)];
      const shared = (answer as { $ref?: string } | undefined)?.$ref;
      if (shared) answer = this.doc.components.responses[shared.replace("#/components/responses/", "")];
      const schema = answer?.content?.["application/json"]?.schema;
      // references point into the document's components, carried along for ajv to resolve
      v = schema ? this.ajv.compile({ ...schema, components: this.doc.components }) : null;
      this.cache.set(key, v);
    }
    return v;
  }

  /** The envelope error body (what 404 and 405 of unknown paths and methods answer). */
  envelope(): ValidateFunction {
    const v = this.validator({ method: "GET", path: "/v1/availability" }, 401);
    if (!v) throw new Error("the document has no envelope error body");
    return v;
  }
}

// --- the property ---

/**
 * The property every fuzzed request must keep, and the reads that must still work afterwards.
 *
 *  - the answer is never a 5xx;
 *  - its status is one the OpenAPI document lists for the route the request reaches (a 404 for a
 *    path no route has, a 405 with `Allow` for a known path and another method);
 *  - its body is the one the document gives for that status;
 *  - it carries no credential of the world and nothing of the server's insides (stack traces,
 *    SQL, driver errors) that the request did not itself contain.
 */

const METHODS: HTTPMethod[] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** Which table route a method and path reach, the way the server's router decides it. */
export class Resolver {
  private readonly router = FindMyWay({ ignoreTrailingSlash: false });

  constructor(table: readonly Route[] = routes) {
    for (const r of table) {
      this.router.on(r.method, r.path, () => {}, { route: r });
      if (r.method === "GET") this.router.on("HEAD", r.path, () => {}, { route: r });
    }
  }

  route(method: string, path: string): Route | null {
    if (!METHODS.includes(method as HTTPMethod)) return null;
    const found = this.router.find(method as HTTPMethod, path);
    return (found?.store as { route: Route } | undefined)?.route ?? null;
  }

  allowed(path: string): string[] {
    return METHODS.filter((m) => this.router.find(m, path) !== null);
  }
}

/** Text that tells of the server's insides; a body may hold it only when the request did. */
const INSIDES = [
  /\bat [\w.<>$]+ \(?[^)\s]*:\d+:\d+\)?/,
  /node_modules/,
  /\/work\/|\/src\/[\w/]+\.[jt]s/,
  /\bSELECT\b[\s\S]+\bFROM\b/i,
  /syntax error at or near/,
  /violates [\w ]+ constraint/,
  /duplicate key value/,
  /invalid input syntax for/,
  /out of range for type/,
  /\b(TypeError|RangeError|ReferenceError|SyntaxError): /,
  /ECONNREFUSED|ETIMEDOUT/,
];

function decodable(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}

export interface Outcome {
  status: number;
  problems: string[];
  body: string;
}

/** Requests tried and statuses seen, per route, for the table the suite prints. */
export class Tally {
  readonly rows = new Map<string, { tried: number; statuses: Map<number, number> }>();

  add(route: string, status: number): void {
    let row = this.rows.get(route);
    if (!row) this.rows.set(route, (row = { tried: 0, statuses: new Map() }));
    row.tried++;
    row.statuses.set(status, (row.statuses.get(status) ?? 0) + 1);
  }

  get total(): number {
    let n = 0;
    for (const r of this.rows.values()) n += r.tried;
    return n;
  }

  table(title: string): string {
    const width = Math.max(30, ...[...this.rows.keys()].map((k) => k.length));
    const lines = [`${title}`, `${"route".padEnd(width)}  tried  statuses`];
    for (const [route, row] of [...this.rows].sort(([a], [b]) => a.localeCompare(b))) {
      const statuses = [...row.statuses]
        .sort(([a], [b]) => a - b)
        .map(([s, n]) => `${s}:${n}`)
        .join(" ");
      lines.push(`${route.padEnd(width)}  ${String(row.tried).padStart(5)}  ${statuses}`);
    }
    lines.push(`${"total".padEnd(width)}  ${String(this.total).padStart(5)}`);
    return lines.join("\n");
  }
}

/** The body of an answer as text, decompressed when the server compressed it. */
export function bodyText(res: LightMyRequestResponse): string {
  const enc = String(res.headers["content-encoding"] ?? "");
  if (enc === "gzip") return gunzipSync(res.rawPayload).toString("utf8");
  if (enc === "deflate") return inflateSync(res.rawPayload).toString("utf8");
  if (enc === "br") return brotliDecompressSync(res.rawPayload).toString("utf8");
  return res.body;
}

export class Checker {
  readonly resolver = new Resolver();
  readonly tally = new Tally();
  /** Every cursor the server issued, for requests that send them back (as issued or altered). */
  readonly cursors: string[] = [];
  /**
   * The documented 5xx a route's valid samples answer (route-samples' `status`: a test send to a
   * provider tests cannot reach); that one answer of that route keeps the property.
   */
  readonly expected5xx = new Map<string, number>();

  constructor(
    readonly app: FastifyInstance,
    readonly doc: Document,
    /** Strings no answer may contain: every key and connection credential of the world. */
    readonly secrets: string[],
  ) {}

  /** Sends one request and checks the answer; the problems found (none when it keeps the property). */
  async send(req: FuzzRequest): Promise<Outcome> {
    const res = await this.app.inject({
      method: req.method as "GET",
      url: req.url,
      headers: req.headers,
      ...(req.payload === undefined ? {} : { payload: req.payload }),
    });
    this.tally.add(req.route, res.statusCode);
    const next = /"next_cursor":"([^"]+)"/.exec(res.body)?.[1];
    if (next && this.cursors.length < 200 && !this.cursors.includes(next)) this.cursors.push(next);
    const problems: string[] = [];
    const status = res.statusCode;
    if (status >= 500 && this.expected5xx.get(req.route) !== status) problems.push(`answered ${status}`);
    let text: string;
    try {
      text = bodyText(res);
    } catch (err) {
      problems.push(`the body does not decompress: ${(err as Error).message}`);
      text = "";
    }

    // the path as the server routes it (light-my-request resolves dot segments, as a proxy would)
    const path = new URL(req.url, "http://localhost").pathname;
    const route = this.resolver.route(req.method, path);
    let validate;
    if (!decodable(path)) {
      // a path that is not percent-encoded UTF-8 reaches no route: a 400 in the envelope
      if (status !== 400)
        problems.push(`a path that is not valid percent-encoding answered ${status}, not 400`);
      validate = this.doc.envelope();
    } else if (route) {
      const documented = this.doc.statuses(route);
      if (!documented.includes(status))
        problems.push(
          `${status} is not documented for ${route.method} ${route.path} (${documented.join(", ")})`,
        );
      validate = this.doc.validator(route, status);
    } else if (!API_PATH.test(path)) {
      // dot segments led out of the API to a dashboard page (`/healthz/..` is `/`): the
      // dashboard's own answers (a redirect, a page, a 405), outside the REST document; only
      // "never a 5xx" holds there
      validate = null;
    } else {
      const allow = this.resolver.allowed(path);
      // a URL over the edge's limit is a 414 before any routing (src/http/edge.ts), whatever the method
      const tooLong = req.url.length > MAX_URL_LENGTH && status === 414;
      if (tooLong) validate = this.doc.envelope();
      else if (allow.length > 0) {
        if (status !== 405)
          problems.push(`a known path with method ${req.method} answered ${status}, not 405`);
        else if (!res.headers.allow) problems.push("a 405 without an Allow header");
      } else if (status !== 404) problems.push(`an unknown path answered ${status}, not 404`);
      if (!tooLong) validate = status === 404 || status === 405 ? this.doc.envelope() : null;
    }
    if (validate && req.method !== "HEAD") {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        problems.push(`the body is not JSON: ${text.slice(0, 200)}`);
      }
      if (body !== undefined && !validate(body))
        problems.push(
          `the body does not match the document: ${JSON.stringify(validate.errors).slice(0, 600)}`,
        );
      // a keyset page that says there is more gives the cursor to get it
      const page = (body as { pagination?: { has_more?: unknown; next_cursor?: unknown } } | undefined)
        ?.pagination;
      if (page && "next_cursor" in page && page.has_more === true && !page.next_cursor)
        problems.push("has_more is true but next_cursor is null: no way to continue");
    }

    for (const s of this.secrets)
      if (s && text.includes(s)) problems.push(`the body holds a credential (${s.slice(0, 8)}…)`);
    const sent = `${req.url} ${typeof req.payload === "string" ? req.payload : ""} ${JSON.stringify(req.headers)}`;
    for (const re of INSIDES)
      if (re.test(text) && !re.test(sent)) problems.push(`the body tells of the server's insides (${re})`);
    return { status, problems, body: text };
  }
}

/** Describes a failed request for the assertion message. */
export function describe(req: FuzzRequest, out: Outcome): string {
  const payload =
    req.payload === undefined
      ? ""
      : typeof req.payload === "string"
        ? req.payload.length > 600
          ? `${req.payload.slice(0, 600)}… (${req.payload.length} chars)`
          : req.payload
        : `<${req.payload.length} bytes>`;
  return [
    `${req.method} ${req.url.length > 400 ? `${req.url.slice(0, 400)}…` : req.url} (from ${req.route})`,
    `  mutations: ${req.why.join("; ") || "none (a valid sample)"}`,
    `  headers: ${JSON.stringify(req.headers).slice(0, 300)}`,
    payload ? `  body: ${payload}` : "",
    `  answered ${out.status}: ${out.body.slice(0, 600)}`,
    ...out.problems.map((p) => `  - ${p}`),
  ]
    .filter(Boolean)
    .join("\n");
}

// --- the reads of an account, which must keep answering 2xx with the documented body ---

/** The keys whose accounts the sweep reads: every tenant of the world. */
export const readerKeys = (w: RouteWorld) => [
  w.keys.alicePersonal,
  w.keys.aliceOrgA,
  w.keys.bobPersonal,
  w.keys.bobOrgB,
  w.keys.carolPersonal,
  w.keys.davePersonal,
];

const ACCOUNT_READS: [string, string][] = [
  ["GET", "/v1/connections?limit=100"],
  ["GET", "/v1/availability"],
  ["GET", "/v1/availability?limit=1000&include_synthetic=false"],
  ["GET", "/v1/availability/summary"],
  ["GET", "/v1/availability/summary?window=week"],
  ["GET", "/v1/availability/summary?window=month"],
  ["GET", "/v1/executions"],
  ["GET", "/v1/executions?include_error_details=true"],
  ["GET", "/v1/executions?group_by=workflow"],
  ["GET", "/v1/incidents"],
  ["GET", "/v1/anomalies"],
  ["GET", "/v1/alerts"],
  ["GET", "/v1/analytics?metric_type=daily_availability"],
  ["GET", "/v1/usage?limit=100"],
  ["GET", "/v1/budget"],
  ["GET", "/v1/webhooks"],
];

/**
 * Reads every account of `keys`: its lists, and one page further where a cursor says there is
 * one. `full` adds every metric and, for each connection the account lists, the connection, its
 * budget, its usage totals and its summary. Returns the failures, described.
 */
export async function sweep(checker: Checker, keys: string[], opts: { full?: boolean } = {}) {
  const failures: string[] = [];
  const read = async (key: string, method: string, url: string) => {
    const req: FuzzRequest = {
      route: "(reads)",
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      why: [],
    };
    const out = await checker.send(req);
    if (out.status < 200 || out.status >= 300) out.problems.unshift(`a read answered ${out.status}`);
    if (out.problems.length) failures.push(describe(req, out));
    try {
      return JSON.parse(out.body) as Record<string, unknown>;
    } catch {
      return {};
    }
  };
  const seen = new Set<string>();
  for (const key of keys) {
    const reads = [...ACCOUNT_READS];
    if (opts.full)
      reads.push(...METRIC_TYPES.map((m): [string, string] => ["GET", `/v1/analytics?metric_type=${m}`]));
    for (const [method, url] of reads) {
      const body = await read(key, method, url);
      const next = (body.pagination as { next_cursor?: string | null } | undefined)?.next_cursor;
      if (next) {
        const sep = url.includes("?") ? "&" : "?";
        await read(key, method, `${url}${sep}cursor=${encodeURIComponent(next)}`);
      }
      if (opts.full && url.startsWith("/v1/connections?")) {
        for (const c of (body.connections ?? []) as { id: string }[]) {
          if (seen.has(c.id)) continue;
          seen.add(c.id);
          await read(key, "GET", `/v1/connections/${c.id}`);
          await read(key, "GET", `/v1/connections/${c.id}/budget`);
          await read(key, "PUT", `/v1/usage?connection_id=${c.id}`);
          await read(key, "GET", `/v1/availability/summary?connection_id=${c.id}`);
        }
      }
    }
  }
  return failures;
}

// --- the REST run ---

/**
 * The REST half of the fuzz suite, on any pair of stores: every route of the table, in table
 * order (deletes last), is sent `runs` generated requests; each answer must keep the property
 * (`Checker`); after each resource's writes the writers' accounts, and at the end every account, are read again.
 */

/** Extra valid requests beyond route-samples.ts, so the generator starts from fuller bodies. */
function extraSamples(r: Route, w: RouteWorld, now: Date): SampleRequest[] {
  switch (routeKey(r)) {
    case "POST /v1/gateway/ingest":
      return [{ url: "/v1/gateway/ingest", key: w.keys.ingest, body: sampleHeartbeat(now) }];
    case "PUT /v1/connections/:id":
      return [
        {
          url: `/v1/connections/${w.conns.OB}`,
          key: w.keys.bobOrgB,
          body: { heartbeat_interval_seconds: 120, heartbeat_grace_seconds: 30, configuration: { a: [1] } },
        },
      ];
    case "GET /v1/executions":
      return [
        {
          url: `/v1/executions?group_by=workflow&limit=1&since=${new Date(now.getTime() - 86_400_000).toISOString()}`,
          key: w.keys.alicePersonal,
        },
      ];
    default:
      return [];
  }
}

/** Paths of the REST API and the other JSON doors; everything else is the dashboard's. */
const API_PATH = /^\/(v1|healthz|readyz|livez|mcp|oauth|\.well-known|docs)(\/|$)/;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** How many distinct problems to report, with how many examples each. */
const MAX_PROBLEMS = 60;
const EXAMPLES = 2;

/**
 * Problems found whose fix lies outside the files this suite's fixes may touch; reported as TODO
 * (visible in every run, not failing it) until fixed there. Each names where the fix belongs.
 */
export const KNOWN: { match: RegExp; todo: string }[] = [];

/** Collects failures by kind (route and first problem), keeping a few examples of each. */
export class Findings {
  readonly kinds = new Map<string, { count: number; examples: string[] }>();

  add(route: string, problem: string, example: string): void {
    const kind = `${route}: ${problem.replace(/\s*[:(].*$/s, "").slice(0, 120)}`;
    let k = this.kinds.get(kind);
    if (!k) this.kinds.set(kind, (k = { count: 0, examples: [] }));
    k.count++;
    if (k.examples.length < EXAMPLES) k.examples.push(example);
  }

  report(t: Test, what: string): void {
    if (this.kinds.size === 0) {
      t.pass(`${what}: every answer kept the property`);
      return;
    }
    t.comment(`${what}: ${this.kinds.size} kinds of problem\n${[...this.kinds.keys()].join("\n")}`);
    for (const [kind, k] of [...this.kinds].slice(0, MAX_PROBLEMS)) {
      const message = `${what}: ${kind} (${k.count}×)\n${k.examples.join("\n")}`;
      const known = KNOWN.find((x) => k.examples.every((e) => x.match.test(e)));
      if (known) t.fail(message, { todo: known.todo });
      else t.fail(message);
    }
    if (this.kinds.size > MAX_PROBLEMS)
      t.fail(`${what}: ${this.kinds.size - MAX_PROBLEMS} more kinds of problem`);
  }
}

export interface RouteRunOptions {
  runs: number;
  seed: number;
  /** Label of the stores, for messages. */
  label: string;
  /** Read the writers' accounts after each resource's writes (true), or only at the end. */
  readAfterEachResource?: boolean;
}

/** Fuzzes every route of the table on `ta`; returns the checker (its tally is the table to print). */
export async function fuzzRoutes(t: Test, ta: TestApp, w: RouteWorld, opts: RouteRunOptions) {
  const doc = await Document.load(ta.app);
  const secrets = [...Object.values(w.keys), ...w.secrets, ta.ctx.config.secret ?? ""].filter(Boolean);
  const checker = new Checker(ta.app, doc, secrets as string[]);
  const keys = readerKeys(w);
  // the accounts the samples write to, read after each resource's writes (all of them at the end)
  const writers = [w.keys.alicePersonal, w.keys.aliceOrgA, w.keys.bobOrgB];
  const findings = new Findings();

  const baseline = await sweep(checker, keys, { full: true });
  t.same(baseline, [], `${opts.label}: every read of every account answers before fuzzing`);

  const protect = Object.values(w.conns);
  const ordered = [...routes].sort((a, b) => Number(a.method === "DELETE") - Number(b.method === "DELETE"));
  for (const [i, route] of ordered.entries()) {
    const key = routeKey(route);
    const sample = routeSamples[key];
    if (!sample) {
      t.fail(`${key} has no sample request in test/helpers/route-samples.ts`);
      continue;
    }
    const samples = [...sample.ok(w), ...extraSamples(route, w, ta.ctx.now())];
    for (const s of samples)
      if (s.status !== undefined && s.status >= 500) checker.expected5xx.set(key, s.status);
    const methodsAt = routes.filter((r) => r.path === route.path).map((r) => r.method as string);
    if (methodsAt.includes("GET")) methodsAt.push("HEAD");
    // ids are case-insensitive: each sample naming one answers the same with every id upper-cased
    for (const s of sample.ok(w)) {
      const upper = (x: string) => x.replace(UUID, (id) => id.toUpperCase());
      const body = s.body === undefined ? undefined : JSON.parse(upper(JSON.stringify(s.body)));
      if (upper(s.url) === s.url && JSON.stringify(body) === JSON.stringify(s.body)) continue;
      const req: FuzzRequest = {
        route: key,
        method: route.method,
        url: upper(s.url),
        headers: {
          ...(s.key ? { authorization: `Bearer ${s.key}` } : {}),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
        why: ["the sample with its ids upper-cased"],
      };
      const out = await checker.send(req);
      if (out.status !== (s.status ?? route.status))
        out.problems.push(`an upper-case id answered ${out.status}, not ${s.status ?? route.status}`);
      for (const p of out.problems) findings.add(key, p, describe(req, out));
    }
    const fuzz = routeFuzz(route, samples, doc, w, methodsAt, protect, checker.cursors);
    await fc.assert(
      fc.asyncProperty(fuzz.requests, async (req: FuzzRequest) => {
        const out = await checker.send(req);
        for (const p of out.problems) findings.add(key, p, describe(req, out));
        // problems are collected (every kind is reported, not only the first), so the run goes on
        return true;
      }),
      { seed: seedFor(key, opts.seed), numRuns: opts.runs },
    );
    const row = checker.tally.rows.get(key);
    progress(`${opts.label}: ${key}: ${row?.tried ?? 0} requests (${i + 1}/${ordered.length} routes)`);
    const next = ordered[i + 1];
    const wrote = ordered.some((r) => r.tag === route.tag && r.method !== "GET");
    const endOfResource =
      next && (next.tag !== route.tag || next.method === "DELETE") && route.method !== "DELETE";
    if (opts.readAfterEachResource !== false && wrote && endOfResource) {
      const failures = await sweep(checker, writers);
      for (const f of failures)
        findings.add(`reads after ${key}`, f.split("\n").find((l) => l.startsWith("  - ")) ?? f, f);
    }
  }
  const after = await sweep(checker, keys, { full: true });
  for (const f of after)
    findings.add("reads at the end", f.split("\n").find((l) => l.startsWith("  - ")) ?? f, f);
  findings.report(t, opts.label);
  return checker;
}
