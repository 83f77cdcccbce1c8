import fc from "fast-check";
import type { Route } from "../../src/http/route.js";
import type { RouteWorld, SampleRequest } from "../helpers/route-samples.js";
import type { Document, JsonSchema, Parameter } from "./harness.js";
import {
  DupKeys,
  jsonText,
  nested,
  NUMERIC_TEXT,
  ODD_PARAM_NAMES,
  oddDate,
  oddId,
  oddNumber,
  oddText,
  oddValue,
  RawJson,
} from "./values.js";

/**
 * Requests for one route of the table, made from its valid sample requests
 * (test/helpers/route-samples.ts) and the OpenAPI document's description of its parameters and
 * body: each is a sample with a few mutations (a parameter set to a boundary or odd value,
 * removed, repeated or unknown; a path id in another form; a body field changed, removed or
 * added; a malformed, oversized or mistyped body; another caller; another method).
 */

export interface FuzzRequest {
  /** The route the request was made from ("METHOD /path" of the table). */
  route: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
  /** The mutations applied, for the failure report. */
  why: string[];
}

const NO_BODY = Symbol("no body");

/** A request being built: the parts a mutation changes. */
interface Draft {
  method: string;
  /** The route's path with parameters, e.g. /v1/connections/:id. */
  path: string;
  params: Record<string, string>;
  /** A path that replaces the route's (unknown paths). */
  rawPath?: string;
  /** Query pairs; a null value is a bare name (`?name`); `raw` values are sent as written. */
  query: { name: string; value: string | null; raw?: boolean }[];
  body: unknown;
  rawBody?: string | Buffer;
  contentType?: string | null;
  authorization: string | null;
  headers: Record<string, string>;
  why: string[];
}

type Mutation = (d: Draft) => Draft;

// --- encoding ---

/** Percent-encodes text as a client would, lone surrogate halves as their WTF-8 bytes. */
export function pct(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out += encodeURIComponent(s.slice(i, i + 2));
        i++;
        continue;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      out += [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join("");
      continue;
    }
    out += encodeURIComponent(s[i] as string);
  }
  return out;
}

function build(route: string, d: Draft): FuzzRequest {
  const path = d.rawPath ?? d.path.replace(/:(\w+)/g, (_, n: string) => pct(d.params[n] ?? ""));
  const qs = d.query
    .map((q) => (q.value === null ? pct(q.name) : `${pct(q.name)}=${q.raw ? q.value : pct(q.value)}`))
    .join("&");
  const headers: Record<string, string> = { ...d.headers };
  if (d.authorization !== null) headers.authorization = d.authorization;
  let payload: string | Buffer | undefined;
  if (d.rawBody !== undefined) payload = d.rawBody;
  else if (d.body !== NO_BODY) payload = jsonText(d.body);
  if (payload !== undefined && d.contentType === undefined) headers["content-type"] = "application/json";
  if (d.contentType) headers["content-type"] = d.contentType;
  return {
    route,
    method: d.method,
    url: qs || d.query.length ? `${path}?${qs}` : path,
    headers,
    ...(payload === undefined ? {} : { payload }),
    why: d.why,
  };
}

/** A sample request as a draft: its path parameters, query pairs and body. */
function draftOf(route: Route, s: SampleRequest): Draft {
  const u = new URL(s.url, "http://x");
  const params: Record<string, string> = {};
  const names = route.path.split("/");
  const values = u.pathname.split("/");
  names.forEach((n, i) => {
    if (n.startsWith(":")) params[n.slice(1)] = decodeURIComponent(values[i] ?? "");
  });
  return {
    method: route.method,
    path: route.path,
    params,
    query: [...u.searchParams].map(([name, value]) => ({ name, value })),
    body: s.body === undefined ? NO_BODY : s.body,
    authorization: s.key ? `Bearer ${s.key}` : null,
    headers: {},
    why: [],
  };
}

// --- values from the document's schemas ---

function resolve(s: JsonSchema | undefined, defs: Record<string, JsonSchema>): JsonSchema | undefined {
  let cur = s;
  for (let i = 0; cur?.$ref && i < 10; i++) cur = defs[cur.$ref.replace("#/components/schemas/", "")];
  return cur;
}

/** The ids a uuid field is given: the world's, in their own and odd forms, and absent ones. */
function idValue(ids: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...ids) },
    { weight: 2, arbitrary: fc.constantFrom(...ids).chain(oddId) },
  );
}

const recent = fc
  .integer({ min: -90 * 86_400_000, max: 86_400_000 })
  .map((ms) => new Date(Date.now() + ms).toISOString());

/**
 * Values of a JSON schema: mostly valid, with every bound and its neighbours (min, max, one past
 * either, a fraction where a whole number is asked), and sometimes any odd value.
 */
export function fromSchema(
  schema: JsonSchema | undefined,
  defs: Record<string, JsonSchema>,
  ids: string[],
  depth = 0,
): fc.Arbitrary<unknown> {
  const s = resolve(schema, defs);
  if (!s || depth > 5) return oddValue;
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return fc.oneof(...alts.map((a) => fromSchema(a, defs, ids, depth + 1)));
  if ("const" in s) return fc.constant(s.const);
  if (s.enum) return fc.constantFrom(...s.enum);
  if (s.not) return oddValue;
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case "string": {
      if (s.format === "uuid") return idValue(ids);
      if (s.format === "date-time") return fc.oneof({ weight: 2, arbitrary: recent }, oddDate);
      if (s.pattern === "^-?\\d+$")
        return fc.oneof(fc.constantFrom(...NUMERIC_TEXT), fc.integer().map(String));
      const min = s.minLength ?? 0;
      const max = s.maxLength ?? 300;
      const bounds = [min, max, max + 1, Math.max(0, min - 1)].map((n) => "v".repeat(n));
      return fc.oneof(
        { weight: 3, arbitrary: fc.string({ minLength: min, maxLength: Math.min(max, 30) }) },
        { weight: 2, arbitrary: fc.constantFrom(...bounds) },
        { weight: 1, arbitrary: fc.webUrl() },
        { weight: 2, arbitrary: oddText },
      );
    }
    case "integer":
    case "number": {
      const lo = s.minimum ?? s.exclusiveMinimum ?? -1e6;
      const hi = s.maximum ?? 1e6;
      const edges = [lo, hi, lo - 1, hi + 1, hi + 0.5, lo + 0.01, hi - 0.001, (lo + hi) / 2];
      return fc.oneof(
        {
          weight: 2,
          arbitrary:
            type === "integer"
              ? fc.integer({ min: Math.max(lo, -2e9), max: Math.min(hi, 2e9) })
              : fc.double({ min: lo, max: hi, noNaN: true }),
        },
        { weight: 2, arbitrary: fc.constantFrom(...edges) },
        { weight: 1, arbitrary: oddNumber },
      );
    }
    case "boolean":
      return fc.oneof(fc.boolean(), fc.constantFrom("true", 1, null));
    case "null":
      return fc.constant(null);
    case "array": {
      const item = fromSchema(s.items, defs, ids, depth + 1);
      const max = s.maxItems ?? 5;
      return fc.oneof(
        { weight: 4, arbitrary: fc.array(item, { maxLength: Math.min(max, 4) }) },
        { weight: 1, arbitrary: item.map((x) => Array.from({ length: max + 1 }, () => x)) },
      );
    }
    case "object": {
      const props = s.properties ?? {};
      const names = Object.keys(props);
      if (names.length === 0) return fc.dictionary(oddText, oddValue, { maxKeys: 3 });
      const record = fc.record(
        Object.fromEntries(names.map((n) => [n, fromSchema(props[n], defs, ids, depth + 1)])),
        { requiredKeys: (s.required ?? []).filter((n) => names.includes(n)) },
      );
      return record;
    }
    default:
      return oddValue;
  }
}

// --- mutations ---

type Path = (string | number)[];

function setAt(v: unknown, path: Path, x: unknown): unknown {
  if (path.length === 0) return x;
  const [head, ...rest] = path as [string | number, ...Path];
  if (Array.isArray(v) && typeof head === "number") {
    const copy = [...v];
    copy[head as number] = setAt(copy[head as number], rest, x);
    return copy;
  }
  // a named field on an array makes it an object of its items and the field
  const base =
    v !== null && typeof v === "object" && !(v instanceof RawJson) && !(v instanceof DupKeys) ? { ...v } : {};
  return { ...base, [head]: setAt((base as Record<string | number, unknown>)[head], rest, x) };
}

/** Every field of a sample body with the schema at it, plus the schema's fields the sample lacks. */
function bodyFields(body: unknown, schema: JsonSchema | undefined, defs: Record<string, JsonSchema>) {
  const out: { path: Path; schema: JsonSchema | undefined }[] = [];
  const walk = (v: unknown, sch: JsonSchema | undefined, path: Path, depth: number) => {
    let s = resolve(sch, defs);
    const alts = s?.anyOf ?? s?.oneOf;
    if (alts) {
      const want = Array.isArray(v) ? "array" : "object";
      s = resolve(
        alts.find((a) => resolve(a, defs)?.type === want),
        defs,
      );
    }
    if (depth > 4) return;
    if (Array.isArray(v)) {
      v.slice(0, 2).forEach((x, i) => {
        out.push({ path: [...path, i], schema: s?.items });
        walk(x, s?.items, [...path, i], depth + 1);
      });
    } else if (v !== null && typeof v === "object") {
      const names = new Set([...Object.keys(v), ...Object.keys(s?.properties ?? {})]);
      for (const n of names) {
        const sub = s?.properties?.[n];
        out.push({ path: [...path, n], schema: sub });
        walk((v as Record<string, unknown>)[n], sub, [...path, n], depth + 1);
      }
    }
  };
  walk(body, schema, [], 0);
  return out;
}

function deleteAt(v: unknown, path: Path): unknown {
  if (path.length === 0) return v;
  const parentPath = path.slice(0, -1);
  const last = path[path.length - 1] as string | number;
  let parent: unknown = v;
  for (const k of parentPath) parent = (parent as Record<string | number, unknown> | undefined)?.[k];
  if (Array.isArray(parent))
    return setAt(
      v,
      parentPath,
      parent.filter((_, i) => i !== last),
    );
  if (parent === null || typeof parent !== "object") return v;
  const { [last]: _, ...rest } = parent as Record<string | number, unknown>;
  return setAt(v, parentPath, rest);
}

/** Text query parameters from a document value. */
const asQueryText = (v: unknown): string =>
  typeof v === "string" ? v : v instanceof RawJson ? v.text : jsonText(v);

const CONTENT_TYPES = [
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/xml",
  "application/json; charset=utf-16",
  "application/json; charset=latin1",
  "APPLICATION/JSON",
  "application/json;charset=UTF-8",
  "application/vnd.api+json",
  "application/json, text/plain",
  "a/b/c",
  "",
] as const;

const MALFORMED = [
  "",
  " ",
  "{",
  "[",
  "]",
  "nul",
  "{'a':1}",
  '{"a":1,}',
  '{"a":1}garbage',
  '{"a":1}{"b":2}',
  "\ufeff{}",
  '{"a":"\\ud800"}',
  '{"a":"\\u0000"}',
  '{"__proto__":{"admin":true}}',
  '{"constructor":{"prototype":{"admin":true}}}',
  '"just a string"',
  "12",
  "null",
  "true",
  "NaN",
] as const;

const METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] as const;

/** The i-th issued cursor, as is or altered: a character changed, cut short, another's signature. */
function issuedCursor(cursors: string[], i: number): string {
  const c = cursors[i % Math.max(1, cursors.length)];
  if (!c) return "no-cursor-issued-yet";
  const [payload = "", sig = ""] = c.split(".");
  const other = cursors[(i + 1) % cursors.length]?.split(".")[1] ?? sig;
  switch (i % 5) {
    case 1: {
      const at = i % Math.max(1, payload.length);
      return `${payload.slice(0, at)}${payload[at] === "A" ? "B" : "A"}${payload.slice(at + 1)}.${sig}`;
    }
    case 2:
      return c.slice(0, Math.max(1, c.length - 3));
    case 3:
      return `${payload}.${other}`;
    case 4:
      return `${payload}.${sig}.${sig}`;
    default:
      return c;
  }
}

export interface RouteFuzz {
  route: Route;
  key: string;
  /** Arbitrary requests for the route (and wrong methods and unknown paths next to it). */
  requests: fc.Arbitrary<FuzzRequest>;
}

/** The world's ids a uuid field or path parameter is given. */
export function worldIds(w: RouteWorld): string[] {
  return [
    ...Object.values(w.conns),
    w.orgs.orgA.id,
    w.orgs.orgB.id,
    ...Object.values(w.incidents),
    w.webhooks.alice,
    w.webhooks.carol,
    "00000000-0000-4000-8000-000000000000",
  ];
}

/**
 * Requests for `route`: samples mutated by up to four mutations. `methodsAt` says which methods
 * the route's path has (so a wrong one is known to be a 405). `protect` lists ids a destructive
 * route must not be given (the connections the world's reads depend on).
 */
export function routeFuzz(
  route: Route,
  samples: SampleRequest[],
  doc: Document,
  w: RouteWorld,
  methodsAt: string[],
  protect: string[] = [],
  /** Cursors the server issued so far (any endpoint, any query), filled as the run goes. */
  cursors: string[] = [],
): RouteFuzz {
  const key = `${route.method} ${route.path}`;
  const ids = worldIds(w);
  const pathIds = route.method === "DELETE" ? ids.filter((id) => !protect.includes(id)) : ids;
  const queryParams: Parameter[] = doc.parameters(route, "query");
  const pathParams: Parameter[] = doc.parameters(route, "path");
  const bodySchema = doc.requestBody(route);
  const defs = doc.schemas;
  const limit = route.bodyLimit ?? 1024 * 1024;

  const mutations: { weight: number; arbitrary: fc.Arbitrary<Mutation> }[] = [];
  const add = (weight: number, arbitrary: fc.Arbitrary<Mutation>) => mutations.push({ weight, arbitrary });

  // query parameters: set (valid, boundary or odd), removed, repeated, unknown, bare
  const names = queryParams.map((p) => p.name);
  if (queryParams.length > 0) {
    const valueOf = (p: Parameter) =>
      fc.oneof(
        { weight: 3, arbitrary: fromSchema(p.schema, {}, ids).map(asQueryText) },
        { weight: 1, arbitrary: oddText },
        { weight: 1, arbitrary: oddDate },
        // a real cursor, of this query or another, as issued or tampered with
        { weight: p.name === "cursor" ? 4 : 0, arbitrary: fc.nat().map((i) => issuedCursor(cursors, i)) },
      );
    add(
      6,
      fc
        .constantFrom(...queryParams)
        .chain((p) => valueOf(p).map((v) => [p.name, v] as const))
        .map(([name, value]): Mutation => (d) => ({
          ...d,
          query: [...d.query.filter((q) => q.name !== name), { name, value }],
          why: [...d.why, `query ${name}=${JSON.stringify(value).slice(0, 80)}`],
        })),
    );
    add(
      2,
      fc.constantFrom(...names).map((name): Mutation => (d) => ({
        ...d,
        query: d.query.filter((q) => q.name !== name),
        why: [...d.why, `query ${name} removed`],
      })),
    );
    add(
      2,
      fc
        .constantFrom(...queryParams)
        .chain((p) => fc.tuple(fc.constant(p.name), valueOf(p)))
        .map(([name, value]): Mutation => (d) => ({
          ...d,
          query: [...d.query, { name, value }, { name, value }],
          why: [...d.why, `query ${name} given twice`],
        })),
    );
    add(
      1,
      fc.constantFrom(...names).map((name): Mutation => (d) => ({
        ...d,
        query: [...d.query, { name, value: null }],
        why: [...d.why, `query ${name} bare`],
      })),
    );
  }
  add(
    1,
    fc
      .tuple(fc.constantFrom(...ODD_PARAM_NAMES), fc.oneof(oddText, fc.constant("")))
      .map(([name, value]): Mutation => (d) => ({
        ...d,
        query: [...d.query, { name, value }],
        why: [...d.why, `unknown query ${JSON.stringify(name)}`],
      })),
  );
  add(
    1,
    fc
      .constantFrom("%", "%zz", "%ED%A0%80", "%C0%80", "%FF", "%00", "a=%", "=", "&&", "a=b=c")
      .map((raw): Mutation => (d) => ({
        ...d,
        query: [...d.query, { name: names[0] ?? "x", value: raw, raw: true }],
        why: [...d.why, `raw query value ${raw}`],
      })),
  );

  // path parameters: ids in other forms, other tenants' ids, odd text
  for (const p of pathParams) {
    add(
      4,
      fc
        .oneof(
          { weight: 3, arbitrary: fc.constantFrom(...pathIds).chain(oddId) },
          { weight: 1, arbitrary: fc.constantFrom(...pathIds) },
          { weight: 1, arbitrary: oddText.filter((s) => s.length < 3000) },
        )
        .map((v): Mutation => (d) => {
          // a destructive route keeps away from the world's connections in any spelling
          const value =
            route.method === "DELETE" && protect.some((id) => id === v.trim().toLowerCase()) ? "nope" : v;
          return {
            ...d,
            params: { ...d.params, [p.name]: value },
            why: [...d.why, `path ${p.name}=${JSON.stringify(value).slice(0, 80)}`],
          };
        }),
    );
  }

  // the body: a field set, removed or added, the whole body replaced
  if (route.body) {
    const fields = samples.flatMap((s) => bodyFields(s.body, bodySchema, defs));
    if (fields.length > 0) {
      add(
        8,
        fc
          .constantFrom(...fields)
          .chain((f) =>
            fc
              .oneof(
                { weight: 3, arbitrary: fromSchema(f.schema, defs, ids) },
                { weight: 2, arbitrary: oddValue },
              )
              .map((v) => [f.path, v] as const),
          )
          .map(([path, v]): Mutation => (d) => ({
            ...d,
            body: setAt(d.body === NO_BODY ? {} : d.body, path, v),
            why: [...d.why, `body.${path.join(".")}=${JSON.stringify(v)?.slice(0, 80)}`],
          })),
      );
      add(
        2,
        fc.constantFrom(...fields).map((f): Mutation => (d) => ({
          ...d,
          body: deleteAt(d.body, f.path),
          why: [...d.why, `body.${f.path.join(".")} removed`],
        })),
      );
    }
    add(
      1,
      fc
        .tuple(fc.oneof(fc.constantFrom(...ODD_PARAM_NAMES), oddText), oddValue)
        .map(([name, v]): Mutation => (d) => ({
          ...d,
          body: setAt(d.body === NO_BODY ? {} : d.body, [name], v),
          why: [...d.why, `unknown body field ${JSON.stringify(name).slice(0, 40)}`],
        })),
    );
    add(
      2,
      fc
        .oneof(
          { weight: 3, arbitrary: fromSchema(bodySchema, defs, ids) },
          { weight: 2, arbitrary: oddValue },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              nested(31, "object", "{}"),
              nested(33, "array"),
              nested(100_000, "array"),
            ),
          },
          {
            weight: 1,
            arbitrary: fc.constantFrom(...samples).map(
              (s) =>
                new DupKeys(
                  Object.entries((s.body ?? {}) as Record<string, unknown>).flatMap(([k, v]) => [
                    [k, "first"],
                    [k, v],
                  ]),
                ),
            ),
          },
        )
        .map((v): Mutation => (d) => ({
          ...d,
          body: v,
          why: [...d.why, `body=${JSON.stringify(v)?.slice(0, 80)}`],
        })),
    );
  }

  // raw bodies and content types, on every route (GET included: a client may send one anyway)
  add(
    route.body ? 2 : 1,
    fc
      .oneof(
        { weight: 4, arbitrary: fc.constantFrom(...MALFORMED) },
        { weight: 1, arbitrary: fc.constant(`{"pad":"${"x".repeat(limit)}"}`) },
        {
          weight: 1,
          arbitrary: fc.constant(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
        },
      )
      .map((raw): Mutation => (d) => ({
        ...d,
        rawBody: raw,
        why: [
          ...d.why,
          `raw body ${typeof raw === "string" ? JSON.stringify(raw.slice(0, 60)) : "bytes"}${raw.length > 1000 ? ` (${raw.length} bytes)` : ""}`,
        ],
      })),
  );
  add(
    1,
    fc.constantFrom(...CONTENT_TYPES).map((ct): Mutation => (d) => ({
      ...d,
      contentType: ct,
      ...(d.body === NO_BODY && d.rawBody === undefined ? { rawBody: "a=1" } : {}),
      why: [...d.why, `content-type ${JSON.stringify(ct)}`],
    })),
  );

  // callers: another tenant, a revoked, read-only or ingestion key, a malformed header, none
  const keys = Object.values(w.keys);
  add(
    route.auth === "public" ? 1 : 2,
    fc
      .oneof(
        { weight: 3, arbitrary: fc.constantFrom(...keys).map((k) => `Bearer ${k}`) },
        {
          weight: 2,
          arbitrary: fc.constantFrom(
            "Bearer",
            "Bearer ",
            `bearer ${w.keys.alicePersonal}`,
            `Bearer  ${w.keys.alicePersonal}`,
            `Bearer ${w.keys.alicePersonal}x`,
            `Bearer ${w.keys.alicePersonal.toUpperCase()}`,
            w.keys.alicePersonal,
            "Basic YWxpY2U6cGFzcw==",
            `Bearer vgl_${"0".repeat(40)}`,
            `Bearer ${"x".repeat(5000)}`,
            "Bearer a b c",
          ),
        },
        { weight: 1, arbitrary: fc.constant(null) },
      )
      .map((authorization): Mutation => (d) => ({
        ...d,
        authorization,
        why: [
          ...d.why,
          `authorization ${authorization ? JSON.stringify(authorization.slice(0, 30)) : "none"}`,
        ],
      })),
  );
  add(
    1,
    fc
      .record({
        "x-request-id": fc.constantFrom("", "a".repeat(129), "ok-id", "../../x", "%00", "id with space"),
        "accept-encoding": fc.constantFrom("gzip", "deflate", "br", "identity;q=0", "*", "gzip;q=abc"),
        accept: fc.constantFrom("text/html", "application/xml", "*/*", "application/json;q=0"),
      })
      .map((h): Mutation => (d) => ({
        ...d,
        headers: { ...d.headers, ...h },
        why: [...d.why, `headers ${JSON.stringify(h)}`],
      })),
  );

  // another method on the same path: 405 with Allow
  const wrong = METHODS.filter((m) => !methodsAt.includes(m) && !(m === "OPTIONS" && methodsAt.length === 0));
  if (wrong.length > 0)
    add(
      1,
      fc
        .constantFrom(...wrong)
        .map((m): Mutation => (d) => ({ ...d, method: m, why: [...d.why, `method ${m}`] })),
    );
  // a path next to the route's that does not exist
  add(
    1,
    fc
      .constantFrom("/zz-unknown", "x", "/..", "/%2e%2e", "/%00", "/%ED%A0%80")
      .map((suffix): Mutation => (d) => ({
        ...d,
        rawPath: `${d.path.replace(/:(\w+)/g, (_, n: string) => pct(d.params[n] ?? ""))}${suffix}`,
        why: [...d.why, `path + ${suffix}`],
      })),
  );

  const mutation = fc.oneof(...mutations);
  const requests = fc
    .tuple(
      fc.constantFrom(...samples),
      fc.oneof(
        { weight: 1, arbitrary: fc.constant([]) },
        { weight: 8, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 4 }) },
      ),
    )
    .map(([s, ms]) => {
      let d = draftOf(route, s);
      for (const m of ms) d = m(d);
      return build(key, d);
    });
  return { route, key, requests };
}
