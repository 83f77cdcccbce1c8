import { performance } from "node:perf_hooks";
import { brotliCompressSync, gzipSync } from "node:zlib";
import type { FastifyInstance } from "fastify";
import t, { type Test } from "tap";
import { OTLP_BODY_LIMIT } from "../../src/http/otlp.js";
import { gatewayHeartbeats } from "../../src/stores/series/tables.js";
import type { OtlpEncoding } from "../../src/otlp/types.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import {
  type Attr,
  CONTENT_TYPE,
  decodeExportResponse,
  decodeStatus,
  ENCODINGS,
  encodeRequest,
  type ExportAnswer,
  gaugeMetric,
  histogramMetric,
  type Json,
  metricsRequest,
  type NumberPoint,
  type SpanSpec,
  spanIdOf,
  sumMetric,
  traceIdOf,
  tracesRequest,
} from "../helpers/otlp-bodies.js";
import { call, seedTenants } from "../helpers/tenants.js";

/*
 * Issue #35, "Bad input": what an OpenTelemetry exporter (or the person reading its logs) sees
 * when Vigil's OTLP/HTTP endpoints get what they cannot use, and that nothing is stored twice or
 * half-stored. Every answer is checked as an exporter reads it: the HTTP status, the Content-Type
 * (the request's own encoding), and the body decoded with the OpenTelemetry project's message
 * types (google.rpc.Status for errors, Export…ServiceResponse with its partial_success for 200s).
 * What was stored is read back as the gateway's owner reads it: PUT /v1/usage.
 *
 * Bodies are written by hand as OTLP/JSON and encoded as protobuf too (test/helpers/otlp-bodies.ts):
 * a well-behaved SDK never sends NaN or a negative counter. test/otlp/ingest.test.ts covers what
 * the SDK's own exporters send.
 */

const BACKENDS: { name: BackendName; opts: Parameters<typeof testApp>[1] }[] = [
  { name: "pglite", opts: {} },
  { name: "postgres", opts: { relational: "postgres", series: "postgres" } },
];

const METRICS_TOKEN = "metrics-token-otlp-bad-input-5e1f";

const INPUT = "gen_ai.client.inference.usage.input_tokens";
const OUTPUT = "gen_ai.client.inference.usage.output_tokens";
const CACHE_READ = "gen_ai.client.inference.usage.cache_read.input_tokens";
const CACHE_WRITE = "gen_ai.client.inference.usage.cache_write.input_tokens";
const TOKEN_USAGE = "gen_ai.client.token.usage";
const DURATION = "gen_ai.client.operation.duration";

const RPC = { INVALID_ARGUMENT: 3, PERMISSION_DENIED: 7, UNAUTHENTICATED: 16 } as const;

type Kind = "metrics" | "traces";

const MINUTE = 60_000;
const DAY = 86_400_000;

const model = (name: string, extra: Record<string, Attr> = {}) => ({
  "gen_ai.request.model": name,
  "gen_ai.provider.name": "openai",
  ...extra,
});

// ---- talking to the endpoints ------------------------------------------------------------------

interface SendOptions {
  key?: string | null;
  /** overrides the encoding's Content-Type (a header of its own when set to null) */
  contentType?: string | null;
  headers?: Record<string, string>;
}

function post(app: FastifyInstance, kind: Kind, body: Buffer, encoding: OtlpEncoding, o: SendOptions = {}) {
  const headers: Record<string, string> = { ...o.headers };
  if (o.contentType !== null) headers["content-type"] = o.contentType ?? CONTENT_TYPE[encoding];
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  return app.inject({ method: "POST", url: `/v1/otlp/v1/${kind}`, headers, payload: body });
}

type Reply = Awaited<ReturnType<typeof post>>;

/** An error answer: its status, the Content-Type of the request's encoding, a google.rpc.Status. */
function isError(
  t: Test,
  res: Reply,
  encoding: OtlpEncoding,
  status: number,
  code: number,
  message: RegExp,
  label: string,
) {
  t.equal(res.statusCode, status, `${label}: HTTP ${status}`);
  t.equal(res.headers["content-type"], CONTENT_TYPE[encoding], `${label}: answered in ${encoding}`);
  const body = decodeStatus(res.rawPayload, encoding);
  t.equal(body.code, code, `${label}: google.rpc.Status code ${code}`);
  t.match(body.message, message, `${label}: the message says why`);
}

/** A 200 answer in the request's encoding, decoded. */
function isAnswer(t: Test, res: Reply, kind: Kind, encoding: OtlpEncoding, label: string): ExportAnswer {
  t.equal(res.statusCode, 200, `${label}: HTTP 200`);
  t.equal(res.headers["content-type"], CONTENT_TYPE[encoding], `${label}: answered in ${encoding}`);
  if (res.statusCode !== 200) {
    t.comment(`${label}: ${res.statusCode} ${res.body.slice(0, 500)}`);
    return { partial: true, rejected: -1, message: res.body };
  }
  return decodeExportResponse(kind, res.rawPayload, encoding);
}

async function exportOk(
  t: Test,
  app: FastifyInstance,
  kind: Kind,
  key: string,
  json: Json,
  encoding: OtlpEncoding,
  label: string,
): Promise<ExportAnswer> {
  return isAnswer(
    t,
    await post(app, kind, encodeRequest(kind, json, encoding), encoding, { key }),
    kind,
    encoding,
    label,
  );
}

/** A full success: partial_success unset (0 bytes in protobuf, `{}` in JSON). */
function isFullSuccess(t: Test, res: Reply, kind: Kind, encoding: OtlpEncoding, label: string) {
  const answer = isAnswer(t, res, kind, encoding, label);
  t.same(answer, { partial: false, rejected: 0, message: "" }, `${label}: full success`);
  t.equal(res.body, encoding === "json" ? "{}" : "", `${label}: the empty response body`);
}

interface Usage {
  heartbeats: number;
  tokens: number;
  input: number;
  output: number;
  cacheRead: number;
  requests: number;
  /** model → "input/output" */
  models: Record<string, string>;
}

/** PUT /v1/usage of a connection, as its owner reads it, over every day a row could be at. */
async function usage(app: FastifyInstance, key: string, connectionId: string): Promise<Usage> {
  const now = Date.now();
  const q = new URLSearchParams({
    connection_id: connectionId,
    start_date: new Date(now - 45 * DAY).toISOString(),
    end_date: new Date(now + 2 * DAY).toISOString(),
  });
  const res = await call(app, key, "PUT", `/v1/usage?${q}`);
  if (res.statusCode !== 200) throw new Error(`PUT /v1/usage: ${res.statusCode} ${res.body}`);
  const body = res.json() as {
    totals: { heartbeats: number; tokens: number };
    gateway: {
      input_tokens: number;
      output_tokens: number;
      cache_read_tokens: number;
      requests: number;
      by_model: { model: string; input_tokens: number; output_tokens: number }[];
    } | null;
  };
  const g = body.gateway;
  return {
    heartbeats: body.totals.heartbeats,
    tokens: body.totals.tokens,
    input: g?.input_tokens ?? 0,
    output: g?.output_tokens ?? 0,
    cacheRead: g?.cache_read_tokens ?? 0,
    requests: g?.requests ?? 0,
    models: Object.fromEntries(
      (g?.by_model ?? []).map((m) => [m.model, `${m.input_tokens}/${m.output_tokens}`]),
    ),
  };
}

const NOTHING: Usage = {
  heartbeats: 0,
  tokens: 0,
  input: 0,
  output: 0,
  cacheRead: 0,
  requests: 0,
  models: {},
};

/** A gateway connection of the key's account, with its usage-ingestion key. */
async function newGateway(app: FastifyInstance, key: string, name: string) {
  const res = await call(app, key, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: name,
  });
  if (res.statusCode !== 201) throw new Error(`creating ${name}: ${res.statusCode} ${res.body}`);
  const body = res.json() as { connection: { id: string }; ingest_api_key: string };
  return { id: body.connection.id, key: body.ingest_api_key };
}

/** `vigil_otlp_items_total{signal,outcome}` as GET /metrics reports it (the API port, with METRICS_TOKEN). */
async function otlpItems(app: FastifyInstance, signal: Kind, outcome: string): Promise<number> {
  const res = await app.inject({
    method: "GET",
    url: "/metrics",
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  if (res.statusCode !== 200) throw new Error(`GET /metrics: ${res.statusCode}`);
  for (const line of res.body.split("\n")) {
    if (!line.startsWith("vigil_otlp_items_total{")) continue;
    if (line.includes(`signal="${signal}"`) && line.includes(`outcome="${outcome}"`))
      return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return 0;
}

/** The `system` JSON of a connection's stored heartbeat rows (providers, instance, source). */
async function heartbeatSystems(ta: TestApp, connectionId: string) {
  const page = await ta.ctx.stores.series.page(gatewayHeartbeats, {
    where: [{ column: "connection_id", op: "eq", value: connectionId }],
    limit: 100,
  });
  return page.rows.map((r) => JSON.parse(r.system ?? "{}") as { providers?: string[]; instance?: string });
}

/** Deterministic bytes (a linear congruential generator), as test/otlp/decode.test.ts. */
function pseudoRandomBytes(n: number, seed: number) {
  const out = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

// ---- the checks, on each backend ---------------------------------------------------------------

for (const backend of BACKENDS) {
  t.test(`OTLP bad input on ${backend.name}`, async (t) => {
    if (!(await requireBackend(t, backend.name))) return;
    const ta = await testApp(t, { ...backend.opts, env: { METRICS_TOKEN } });
    const { app } = ta;
    const w = await seedTenants(ta);
    const owner = w.keys.bobOrgB;
    const gateway = (name: string) => newGateway(app, owner, name);
    const usageOf = (id: string) => usage(app, owner, id);

    await t.test(
      "1. malformed protobuf, malformed JSON, JSON that is not OTLP: 400, nothing stored",
      async (t) => {
        const gw = await gateway("malformed");
        const now = Date.now();
        const valid = metricsRequest([
          {
            resource: { "service.instance.id": "gw-m" },
            metrics: [
              sumMetric(INPUT, "delta", [
                { start: now - 2 * MINUTE, time: now - MINUTE, asInt: 100, attributes: model("gpt-4o") },
              ]),
            ],
          },
        ]);
        const validPb = encodeRequest("metrics", valid, "protobuf");
        const validJson = encodeRequest("metrics", valid, "json");
        const cases: [Kind, string, Buffer, OtlpEncoding, RegExp][] = [
          [
            "metrics",
            "random bytes",
            pseudoRandomBytes(512, 42),
            "protobuf",
            /^malformed protobuf ExportMetricsServiceRequest: /,
          ],
          [
            "metrics",
            "text sent as protobuf",
            Buffer.from("not a protobuf, just text"),
            "protobuf",
            /^malformed protobuf .*invalid wire type/,
          ],
          [
            "metrics",
            "a request with a GenAI point, cut short by one byte",
            validPb.subarray(0, validPb.length - 1),
            "protobuf",
            /^malformed protobuf ExportMetricsServiceRequest: index out of range/,
          ],
          [
            "traces",
            "random bytes",
            pseudoRandomBytes(300, 7),
            "protobuf",
            /^malformed protobuf ExportTraceServiceRequest: /,
          ],
          [
            "metrics",
            "malformed JSON",
            Buffer.from('{"resourceMetrics": ['),
            "json",
            /^the body is not valid JSON: /,
          ],
          [
            "metrics",
            "the same request's JSON cut short",
            validJson.subarray(0, validJson.length - 2),
            "json",
            /^the body is not valid JSON: /,
          ],
          ["metrics", "[1,2]", Buffer.from("[1,2]"), "json", /must be a JSON object, got an array/],
          ["metrics", '"x"', Buffer.from('"x"'), "json", /must be a JSON object, got a string/],
          ["metrics", "null", Buffer.from("null"), "json", /must be a JSON object, got null/],
          [
            "metrics",
            '{"resourceMetrics": 5}',
            Buffer.from('{"resourceMetrics": 5}'),
            "json",
            /resourceMetrics: expected array/,
          ],
          [
            "traces",
            '{"resourceSpans": "x"}',
            Buffer.from('{"resourceSpans": "x"}'),
            "json",
            /resourceSpans: expected array/,
          ],
          [
            "metrics",
            "an int64 that is not a number, deep inside",
            Buffer.from(validJson.toString().replace('"asInt":"100"', '"asInt":"12x"')),
            "json",
            /asInt: invalid integer: "12x"/,
          ],
        ];
        for (const [kind, label, body, encoding, message] of cases) {
          const res = await post(app, kind, body, encoding, { key: gw.key });
          isError(t, res, encoding, 400, RPC.INVALID_ARGUMENT, message, `${kind}, ${encoding}, ${label}`);
        }
        t.same(await usageOf(gw.id), NOTHING, "nothing stored from any of them");

        // OTLP: unknown fields are ignored, and an empty request is a success
        for (const [kind, body] of [
          ["metrics", '{"foo":1}'],
          ["traces", '{"foo":1}'],
          ["metrics", "{}"],
        ] as const) {
          const res = await post(app, kind, Buffer.from(body), "json", { key: gw.key });
          isFullSuccess(t, res, kind, "json", `${kind}: ${body}`);
        }
        for (const kind of ["metrics", "traces"] as const) {
          const res = await post(app, kind, Buffer.alloc(0), "protobuf", { key: gw.key });
          isFullSuccess(t, res, kind, "protobuf", `${kind}: an empty protobuf body (an empty request)`);
        }
        t.same(await usageOf(gw.id), NOTHING, "still nothing stored");

        // the well-formed request the broken ones were cut from is stored, once
        isFullSuccess(
          t,
          await post(app, "metrics", validPb, "protobuf", { key: gw.key }),
          "metrics",
          "protobuf",
          "the whole request",
        );
        t.match(await usageOf(gw.id), { heartbeats: 1, input: 100 }, "the whole request is stored");
      },
    );

    await t.test(
      "2. unknown metric names: 200, ignored with their names, counted in /metrics, nothing stored",
      async (t) => {
        const gw = await gateway("unknown metrics");
        const now = Date.now();
        const at = { start: now - 2 * MINUTE, time: now - MINUTE };
        const req = metricsRequest([
          {
            resource: { "service.instance.id": "gw-u" },
            metrics: [
              sumMetric("http.server.request.count", "delta", [
                { ...at, asInt: 3, attributes: { "http.route": "/v1/chat" } },
                { ...at, asInt: 1, attributes: { "http.route": "/health" } },
              ]),
              histogramMetric("my_gateway.upstream.latency", "delta", [{ ...at, count: 2, sum: 0.4 }], "s"),
              gaugeMetric("process.cpu.utilization", [{ time: at.time, asDouble: 0.25 }]),
              histogramMetric(TOKEN_USAGE, "delta", [
                {
                  ...at,
                  count: 1,
                  sum: 12,
                  attributes: model("gpt-4o", { "gen_ai.token.type": "reasoning" }),
                },
              ]),
            ],
          },
        ]);
        for (const encoding of ENCODINGS) {
          const before = await otlpItems(app, "metrics", "ignored");
          const stored = await otlpItems(app, "metrics", "stored");
          const answer = await exportOk(
            t,
            app,
            "metrics",
            gw.key,
            req,
            encoding,
            `${encoding}: unknown metrics`,
          );
          t.equal(answer.partial, true, `${encoding}: a partial success, to say what was ignored`);
          t.equal(answer.rejected, 0, `${encoding}: nothing rejected (ignoring is not an error)`);
          t.match(answer.message, /metrics Vigil does not read, ignored/, encoding);
          for (const name of [
            "http.server.request.count (2)",
            "my_gateway.upstream.latency (1)",
            "process.cpu.utilization (1)",
            "gen_ai.client.token.usage (gen_ai.token.type reasoning) (1)",
          ])
            t.ok(answer.message.includes(name), `${encoding}: the message names ${name}`);
          t.equal(
            (await otlpItems(app, "metrics", "ignored")) - before,
            5,
            `${encoding}: 5 points counted as ignored`,
          );
          t.equal(
            (await otlpItems(app, "metrics", "stored")) - stored,
            0,
            `${encoding}: none counted as stored`,
          );
        }
        t.same(await usageOf(gw.id), NOTHING, "nothing stored");

        // many unknown names: the message stays short and says how many more
        const many = metricsRequest([
          {
            resource: { "service.instance.id": "gw-u" },
            metrics: Array.from({ length: 8 }, (_, i) =>
              sumMetric(`custom.metric.${i}`, "delta", [{ ...at, asInt: i }]),
            ),
          },
        ]);
        const answer = await exportOk(t, app, "metrics", gw.key, many, "json", "8 unknown metrics");
        t.match(
          answer,
          { rejected: 0, message: /custom\.metric\.0 \(1\).* and 3 more/ },
          "five names, and 3 more",
        );
        t.same(await usageOf(gw.id), NOTHING, "still nothing stored");
      },
    );

    await t.test(
      "3. non-finite, negative, unsummed, beyond 2^53, no temporality, a gauge: those points rejected, the rest stored",
      async (t) => {
        const now = Date.now();
        const at = { start: now - 3 * MINUTE, time: now - 2 * MINUTE };
        const req = metricsRequest([
          {
            resource: { "service.instance.id": "gw-v", "service.version": "1.4.2" },
            metrics: [
              sumMetric(INPUT, "delta", [
                { ...at, asInt: 100, attributes: model("m-ok") },
                { ...at, asDouble: "NaN", attributes: model("m-nan") },
                { ...at, asDouble: "Infinity", attributes: model("m-inf") },
                { ...at, asDouble: "-Infinity", attributes: model("m-ninf") },
                { ...at, asInt: -5, attributes: model("m-negative") },
                { ...at, asDouble: -0.5, attributes: model("m-negative-double") },
                { ...at, asInt: "9007199254740993", attributes: model("m-big") },
                { ...at, attributes: model("m-no-value") },
              ]),
              histogramMetric(TOKEN_USAGE, "delta", [
                { ...at, count: 1, sum: 40, attributes: model("m-ok", { "gen_ai.token.type": "output" }) },
                { ...at, count: 2, attributes: model("m-no-sum", { "gen_ai.token.type": "input" }) },
              ]),
              sumMetric(OUTPUT, "unspecified", [
                { ...at, asInt: 7, attributes: model("m-ok") },
                { ...at, asInt: 8, attributes: model("m-other") },
              ]),
              sumMetric(CACHE_READ, "cumulative", [{ time: at.time, asInt: 10, attributes: model("m-ok") }]),
              gaugeMetric(CACHE_WRITE, [{ time: at.time, asInt: 5, attributes: model("m-ok") }]),
            ],
          },
        ]);
        for (const encoding of ENCODINGS) {
          const gw = await gateway(`values ${encoding}`);
          for (const round of ["sent", "resent"]) {
            const label = `${encoding}, ${round}`;
            const answer = await exportOk(t, app, "metrics", gw.key, req, encoding, label);
            t.equal(answer.rejected, 12, `${label}: the 12 bad points rejected`);
            for (const why of [
              `5 points: ${INPUT}: values must be finite and not negative`,
              `1 point: ${INPUT}: a value beyond 2^53 cannot be counted exactly`,
              `1 point: ${INPUT}: the point has no value`,
              `1 point: ${TOKEN_USAGE}: the point has no value (a histogram needs its sum)`,
              `2 points: ${OUTPUT} has no aggregation temporality (delta or cumulative)`,
              `1 point: ${CACHE_READ}: a cumulative point needs start_time_unix_nano`,
              `1 point: ${CACHE_WRITE} is a gauge; Vigil reads it as a sum or a histogram`,
            ])
              t.ok(answer.message.includes(why), `${label}: the message says "${why}"`);
            t.same(
              await usageOf(gw.id),
              {
                heartbeats: 1,
                tokens: 140,
                input: 100,
                output: 40,
                cacheRead: 0,
                requests: 0,
                models: { "m-ok": "100/40" },
              },
              `${label}: the valid points stored, once; none of the rejected ones`,
            );
          }
        }

        // a double beyond the token limit (finite, not negative; here beyond 2^53 too) is rejected
        // as an as_int beyond 2^53 is, and the rest of the request stored
        const gw = await gateway("huge double");
        const huge = metricsRequest([
          {
            resource: { "service.instance.id": "gw-fine" },
            metrics: [sumMetric(INPUT, "delta", [{ ...at, asInt: 100, attributes: model("m-ok") }])],
          },
          {
            resource: { "service.instance.id": "gw-huge" },
            metrics: [
              sumMetric(INPUT, "cumulative", [{ ...at, asDouble: 1e20, attributes: model("m-huge") }]),
            ],
          },
        ]);
        const res = await post(app, "metrics", encodeRequest("metrics", huge, "protobuf"), "protobuf", {
          key: gw.key,
        });
        t.equal(
          res.headers["content-type"],
          CONTENT_TYPE.protobuf,
          "a double of 1e20 tokens: answered in protobuf",
        );
        t.equal(res.statusCode, 200, "a double of 1e20 tokens: HTTP 200, a partial success");
        if (res.statusCode === 200)
          t.match(
            decodeExportResponse("metrics", res.rawPayload, "protobuf"),
            { rejected: 1, message: /at most 1000000000000/ },
            "that point rejected, and said why",
          );
        else
          t.comment(
            `a double of 1e20 tokens: ${res.statusCode} ${decodeStatus(res.rawPayload, "protobuf").message}`,
          );
        t.match(await usageOf(gw.id), { heartbeats: 1, input: 100 }, "the other instance's point stored");
        const states = await ta.ctx.stores.db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM otlp_series WHERE connection_id = $1",
          [gw.id],
        );
        t.equal(states.rows[0]?.n, 0, "no cumulative state kept for a point that was not stored");
      },
    );

    await t.test("4. timestamps far in the future or the past: rejected, the message says so", async (t) => {
      const now = Date.now();
      const point = (time: number, asInt: number, name: string): NumberPoint => ({
        start: time - MINUTE,
        time,
        asInt,
        attributes: model(name),
      });
      const req = metricsRequest([
        {
          resource: { "service.instance.id": "gw-t" },
          metrics: [
            sumMetric(INPUT, "delta", [
              point(now + 10 * MINUTE, 1000, "m-future"),
              point(now - 31 * DAY, 2000, "m-past"),
              { time: 0, asInt: 3000, attributes: model("m-unset") },
              point(now - 3 * MINUTE, 50, "m-ok"),
              point(now + 2 * MINUTE, 5, "m-skew"),
            ]),
          ],
        },
      ]);
      for (const encoding of ENCODINGS) {
        const gw = await gateway(`times ${encoding}`);
        const answer = await exportOk(t, app, "metrics", gw.key, req, encoding, encoding);
        t.equal(answer.rejected, 3, `${encoding}: the future, the old and the unset point rejected`);
        t.match(
          answer.message,
          /1 point: \S+: time_unix_nano is more than 5 minutes in the future; check the exporter's clock/,
          encoding,
        );
        t.match(answer.message, /1 point: \S+: time_unix_nano is more than 30 days in the past/, encoding);
        t.match(answer.message, /1 point: \S+: time_unix_nano is not set/, encoding);
        t.same(
          (await usageOf(gw.id)).models,
          { "m-ok": "50/0", "m-skew": "5/0" },
          `${encoding}: a point 2 minutes ahead (clock skew) is kept; the rejected ones are not stored`,
        );
      }
    });

    await t.test("5. 10,000 series in one request", async (t) => {
      const now = Date.now();
      const at = { start: now - 4 * MINUTE, time: now - 3 * MINUTE };
      const modelName = (j: number) => `bulk-model-${String(j).padStart(5, "0")}`;

      // (a) one instance, 10,000 models: more than a heartbeat may carry, so the instance's points are refused whole
      const wide = metricsRequest([
        {
          resource: { "service.instance.id": "gw-wide" },
          metrics: [
            sumMetric(
              INPUT,
              "delta",
              Array.from({ length: 10_000 }, (_, j) => ({
                ...at,
                asInt: 7,
                attributes: model(modelName(j)),
              })),
            ),
          ],
        },
      ]);
      // (JSON here, protobuf below: each encoding once at this size, to keep the run short)
      for (const encoding of ["json"] as const) {
        const gw = await gateway(`wide ${encoding}`);
        const started = performance.now();
        const answer = await exportOk(t, app, "metrics", gw.key, wide, encoding, `(a) ${encoding}`);
        t.comment(
          `(a) ${encoding}: 10,000 points of one instance answered in ${Math.round(performance.now() - started)} ms`,
        );
        t.equal(answer.rejected, 10_000, `(a) ${encoding}: all 10,000 points rejected`);
        t.match(
          answer.message,
          /instance gw-wide: 10000 models in one export interval, at most 500; its 10000 items were rejected/,
          `(a) ${encoding}: the message names the instance and the 500-model limit`,
        );
        t.same(await usageOf(gw.id), NOTHING, `(a) ${encoding}: nothing stored, not even the first 500`);
      }

      // (b) 20 instances × 500 models, cumulative (so 10,000 series states are read and written): all
      // stored, exactly once, and a resend changes nothing
      const value = (i: number, j: number) => ((i * 500 + j) % 97) + 1;
      let total = 0;
      for (let i = 0; i < 20; i++) for (let j = 0; j < 500; j++) total += value(i, j);
      const spread = (temporality: "cumulative" | "delta") =>
        metricsRequest(
          Array.from({ length: 20 }, (_, i) => ({
            resource: { "service.instance.id": `gw-spread-${i}` },
            metrics: [
              sumMetric(
                INPUT,
                temporality,
                Array.from({ length: 500 }, (_, j) => ({
                  ...at,
                  asInt: value(i, j),
                  attributes: model(modelName(j)),
                })),
              ),
            ],
          })),
        );
      for (const [temporality, encoding] of [["cumulative", "protobuf"]] as const) {
        const gw = await gateway(`spread ${temporality}`);
        const req = spread(temporality);
        const body = encodeRequest("metrics", req, encoding);
        for (const round of ["sent", "resent"]) {
          const label = `(b) ${temporality}, ${encoding}, ${round}`;
          const started = performance.now();
          const res = await post(app, "metrics", body, encoding, { key: gw.key });
          const ms = performance.now() - started;
          t.comment(
            `${label}: 10,000 points of 20 instances (${(body.length / 1024).toFixed(0)} KiB) answered in ${Math.round(ms)} ms`,
          );
          isFullSuccess(t, res, "metrics", encoding, label);
          const u = await usageOf(gw.id);
          t.equal(u.heartbeats, 20, `${label}: one heartbeat per instance`);
          t.equal(u.input, total, `${label}: the input tokens are the sum sent (${total}), once`);
          t.equal(Object.keys(u.models).length, 500, `${label}: 500 models`);
          t.equal(
            u.models[modelName(0)],
            `${[...Array(20).keys()].reduce((s, i) => s + value(i, 0), 0)}/0`,
            `${label}: a model's tokens summed over the instances`,
          );
        }
      }
    });

    await t.test(
      "6. a key of another role, no key, a revoked or unknown key: 403 / 401 in the request's encoding",
      async (t) => {
        const now = Date.now();
        const metrics = metricsRequest([
          {
            resource: { "service.instance.id": "gw-k" },
            metrics: [
              sumMetric(INPUT, "delta", [
                { start: now - 2 * MINUTE, time: now - MINUTE, asInt: 9, attributes: model("gpt-4o") },
              ]),
            ],
          },
        ]);
        const spans = tracesRequest([
          {
            resource: { "service.instance.id": "gw-k" },
            spans: [
              {
                traceId: traceIdOf(600),
                spanId: spanIdOf(600),
                start: now - 2 * MINUTE,
                end: now - MINUTE,
                attributes: model("gpt-4o", { "gen_ai.usage.input_tokens": 9 }),
              },
            ],
          },
        ]);
        const deleted = await gateway("deleted");
        const del = await call(app, owner, "DELETE", `/v1/connections/${deleted.id}`);
        t.ok(
          del.statusCode === 204 || del.statusCode === 200,
          `the connection is deleted (${del.statusCode})`,
        );
        const cases: [string, SendOptions, number, number, RegExp][] = [
          [
            "an API key with every permission",
            { key: owner },
            403,
            RPC.PERMISSION_DENIED,
            /only accepts a key with role usage-ingestion/,
          ],
          [
            "another tenant's API key",
            { key: w.keys.aliceOrgA },
            403,
            RPC.PERMISSION_DENIED,
            /usage-ingestion/,
          ],
          ["no Authorization header", {}, 401, RPC.UNAUTHENTICATED, /Missing API key/],
          ["a revoked key", { key: w.keys.revoked }, 401, RPC.UNAUTHENTICATED, /Invalid or revoked API key/],
          [
            "an unknown key",
            { key: "vk_live_0000000000000000000000000000" },
            401,
            RPC.UNAUTHENTICATED,
            /Invalid or revoked API key/,
          ],
          [
            "the ingestion key of a deleted connection",
            { key: deleted.key },
            401,
            RPC.UNAUTHENTICATED,
            /Invalid or revoked API key/,
          ],
          [
            "Basic instead of Bearer",
            { headers: { authorization: "Basic dXNlcjpwYXNz" } },
            401,
            RPC.UNAUTHENTICATED,
            /Malformed Authorization header/,
          ],
        ];
        const before = await usageOf(w.conns.OB);
        for (const [kind, json] of [
          ["metrics", metrics],
          ["traces", spans],
        ] as const)
          for (const encoding of ENCODINGS)
            for (const [label, opts, status, code, message] of cases) {
              const res = await post(app, kind, encodeRequest(kind, json, encoding), encoding, opts);
              isError(t, res, encoding, status, code, message, `${kind}, ${encoding}, ${label}`);
            }
        // the key is checked before the body is read: no key and a broken body is still a 401
        const broken = await post(app, "metrics", Buffer.from("{"), "json", {});
        isError(t, broken, "json", 401, RPC.UNAUTHENTICATED, /Missing API key/, "no key and a broken body");
        t.same(await usageOf(w.conns.OB), before, "nothing stored in org B's gateway");
      },
    );

    await t.test(
      "7. gzip: accepted; not gzip, another encoding, another type, too large, a gzip bomb: refused",
      async (t) => {
        const now = Date.now();
        const req = (asInt: number, instance: string) =>
          metricsRequest([
            {
              resource: { "service.instance.id": instance },
              metrics: [
                sumMetric(INPUT, "delta", [
                  { start: now - 2 * MINUTE, time: now - MINUTE, asInt, attributes: model("gpt-4o") },
                ]),
              ],
            },
          ]);
        for (const encoding of ENCODINGS) {
          const gw = await gateway(`gzip ${encoding}`);
          const plain = encodeRequest("metrics", req(30, "gw-z"), encoding);
          const gz = gzipSync(plain);
          isFullSuccess(
            t,
            await post(app, "metrics", gz, encoding, {
              key: gw.key,
              headers: { "content-encoding": "gzip" },
            }),
            "metrics",
            encoding,
            `${encoding}, gzip`,
          );
          t.match(await usageOf(gw.id), { heartbeats: 1, input: 30 }, `${encoding}: the gzip body stored`);
          isFullSuccess(
            t,
            await post(app, "metrics", gz, encoding, {
              key: gw.key,
              headers: { "content-encoding": "gzip" },
            }),
            "metrics",
            encoding,
            `${encoding}, gzip resent`,
          );
          t.match(await usageOf(gw.id), { heartbeats: 1, input: 30 }, `${encoding}: resent, stored once`);

          // request decompression is @fastify/compress's, for every route (app.ts): it also takes
          // br and deflate; an encoding it does not know is a 415
          const refused: [string, Buffer, Record<string, string>, number, RegExp][] = [
            ["claims gzip, is not", plain, { "content-encoding": "gzip" }, 400, /decompress|gzip/i],
            [
              "gzip cut short",
              gz.subarray(0, gz.length - 8),
              { "content-encoding": "gzip" },
              400,
              /decompress|gzip/i,
            ],
            ["claims br, is not", plain, { "content-encoding": "br" }, 400, /decompress/i],
            ["claims deflate, is not", plain, { "content-encoding": "deflate" }, 400, /decompress/i],
            [
              "Content-Encoding: snappy",
              plain,
              { "content-encoding": "snappy" },
              415,
              /Unsupported Content-Encoding: snappy/,
            ],
            [
              "Content-Encoding: compress",
              plain,
              { "content-encoding": "compress" },
              415,
              /Unsupported Content-Encoding: compress/,
            ],
          ];
          for (const [label, body, headers, status, message] of refused) {
            const res = await post(app, "metrics", body, encoding, { key: gw.key, headers });
            isError(t, res, encoding, status, RPC.INVALID_ARGUMENT, message, `${encoding}, ${label}`);
          }
          t.match(await usageOf(gw.id), { heartbeats: 1, input: 30 }, `${encoding}: nothing more stored`);

          // a real br body is decompressed like gzip (OTLP requires gzip; other codings are the server's choice)
          const br = brotliCompressSync(encodeRequest("metrics", req(12, "gw-zb"), encoding));
          isFullSuccess(
            t,
            await post(app, "metrics", br, encoding, { key: gw.key, headers: { "content-encoding": "br" } }),
            "metrics",
            encoding,
            `${encoding}, br`,
          );
          t.match(await usageOf(gw.id), { heartbeats: 2, input: 42 }, `${encoding}: the br body stored`);

          // content codings are case-insensitive (RFC 9110 §8.4.1): GZIP is gzip (the same export: stored once)
          const upper = await post(app, "metrics", gz, encoding, {
            key: gw.key,
            headers: { "content-encoding": "GZIP" },
          });
          t.equal(upper.statusCode, 200, `${encoding}: Content-Encoding: GZIP is gzip`);
          t.equal(
            upper.headers["content-type"],
            CONTENT_TYPE[encoding],
            `${encoding}, GZIP: answered in ${encoding}`,
          );
          t.match(await usageOf(gw.id), { heartbeats: 2, input: 42 }, `${encoding}: still stored once`);
        }

        const gw = await gateway("gzip limits");
        // another Content-Type: no encoding to answer in, so protobuf (OTLP's default)
        for (const type of ["text/plain", "application/octet-stream", "application/xml"]) {
          const res = await post(
            app,
            "metrics",
            encodeRequest("metrics", req(1, "gw-l"), "json"),
            "protobuf",
            {
              key: gw.key,
              contentType: type,
            },
          );
          isError(
            t,
            res,
            "protobuf",
            415,
            RPC.INVALID_ARGUMENT,
            /is not OTLP\/HTTP: send application\/x-protobuf or application\/json/,
            `Content-Type ${type}`,
          );
        }
        // a charset parameter is still JSON
        const charset = await post(app, "metrics", encodeRequest("metrics", req(2, "gw-l"), "json"), "json", {
          key: gw.key,
          contentType: "application/json; charset=utf-8",
        });
        t.equal(charset.statusCode, 200, "application/json; charset=utf-8 is JSON");

        // the limit is on the decompressed body: padded OTLP/JSON of exactly the limit passes, one byte more does not
        const small = encodeRequest("metrics", req(4, "gw-l2"), "json");
        const atLimit = Buffer.concat([small, Buffer.alloc(OTLP_BODY_LIMIT - small.length, " ")]);
        const overLimit = Buffer.concat([atLimit, Buffer.from(" ")]);
        const limitCases: [string, Buffer, Record<string, string>, number][] = [
          ["exactly the limit", atLimit, {}, 200],
          ["exactly the limit, gzip", gzipSync(atLimit), { "content-encoding": "gzip" }, 200],
          ["one byte over the limit", overLimit, {}, 413],
          ["one byte over the limit, gzip", gzipSync(overLimit), { "content-encoding": "gzip" }, 413],
        ];
        for (const [label, body, headers, status] of limitCases) {
          const res = await post(app, "metrics", body, "json", { key: gw.key, headers });
          if (status === 200) t.equal(res.statusCode, 200, `${label} (${body.length} bytes on the wire)`);
          else
            isError(
              t,
              res,
              "json",
              413,
              RPC.INVALID_ARGUMENT,
              /Payload too large: at most 8388608 bytes/,
              `${label} (${body.length} bytes on the wire)`,
            );
        }

        // a gzip bomb: 1 MiB on the wire, 1 GiB inflated (64 gzip members of 16 MiB of zeros)
        const member = gzipSync(Buffer.alloc(16 * 1024 * 1024), { level: 9 });
        const bomb = Buffer.concat(Array.from({ length: 64 }, () => member));
        const rss = process.memoryUsage().rss;
        const started = performance.now();
        for (const encoding of ENCODINGS) {
          const res = await post(app, "metrics", bomb, encoding, {
            key: gw.key,
            headers: { "content-encoding": "gzip" },
          });
          isError(
            t,
            res,
            encoding,
            413,
            RPC.INVALID_ARGUMENT,
            /Payload too large/,
            `${encoding}: a gzip bomb of ${bomb.length} bytes`,
          );
        }
        t.comment(
          `gzip bomb: answered in ${Math.round(performance.now() - started)} ms; rss grew ${Math.round((process.memoryUsage().rss - rss) / 1048576)} MiB`,
        );
        t.ok(process.memoryUsage().rss - rss < 256 * 1048576, "the bomb was not inflated into memory");
        t.same(
          (await usageOf(gw.id)).models,
          { "gpt-4o": "6/0" },
          "only the two accepted requests stored (2 + 4 tokens)",
        );
        // and the endpoint still serves
        const after = await post(
          app,
          "metrics",
          encodeRequest("metrics", req(8, "gw-l3"), "protobuf"),
          "protobuf",
          { key: gw.key },
        );
        isFullSuccess(t, after, "metrics", "protobuf", "a request after the bomb");
      },
    );

    await t.test(
      "8. resends: stored once; counter resets and restarts count in full; older points add nothing",
      async (t) => {
        const now = Date.now();
        // on a 10-second boundary: spans are grouped per instance and 10-second window of their ends
        const base = Math.floor((now - 30 * MINUTE) / 10_000) * 10_000;
        const S = base;
        const T = (k: number) => base + k * MINUTE;
        const delta = metricsRequest([
          {
            resource: { "service.instance.id": "gw-r" },
            metrics: [
              sumMetric(INPUT, "delta", [
                { start: T(0), time: T(1), asInt: 100, attributes: model("gpt-4o") },
              ]),
              sumMetric(OUTPUT, "delta", [
                { start: T(0), time: T(1), asInt: 20, attributes: model("gpt-4o") },
              ]),
              histogramMetric(
                DURATION,
                "delta",
                [{ start: T(0), time: T(1), count: 3, sum: 1.5, attributes: model("gpt-4o") }],
                "s",
              ),
            ],
          },
        ]);
        const cumulative = (start: number, time: number, input: number, output: number, calls: number) =>
          metricsRequest([
            {
              resource: { "service.instance.id": "gw-r" },
              metrics: [
                sumMetric(INPUT, "cumulative", [{ start, time, asInt: input, attributes: model("gpt-4o") }]),
                sumMetric(OUTPUT, "cumulative", [
                  { start, time, asInt: output, attributes: model("gpt-4o") },
                ]),
                histogramMetric(
                  DURATION,
                  "cumulative",
                  [{ start, time, count: calls, sum: calls * 0.5, attributes: model("gpt-4o") }],
                  "s",
                ),
              ],
            },
          ]);
        for (const encoding of ENCODINGS) {
          const gw = await gateway(`resend delta ${encoding}`);
          for (let i = 1; i <= 3; i++) {
            const answer = await exportOk(
              t,
              app,
              "metrics",
              gw.key,
              delta,
              encoding,
              `${encoding}, delta, sent ${i}×`,
            );
            t.same(
              answer,
              { partial: false, rejected: 0, message: "" },
              `${encoding}, delta, sent ${i}×: full success`,
            );
            t.match(
              await usageOf(gw.id),
              { heartbeats: 1, input: 100, output: 20, requests: 3 },
              `${encoding}, delta, sent ${i}×: stored once`,
            );
          }

          const cg = await gateway(`resend cumulative ${encoding}`);
          const steps: [
            string,
            Json,
            { heartbeats: number; input: number; output: number; requests: number },
          ][] = [
            [
              "the first point (its series started a minute before)",
              cumulative(S, T(1), 100, 20, 2),
              { heartbeats: 1, input: 100, output: 20, requests: 2 },
            ],
            [
              "the first point again",
              cumulative(S, T(1), 100, 20, 2),
              { heartbeats: 1, input: 100, output: 20, requests: 2 },
            ],
            [
              "the next point",
              cumulative(S, T(2), 150, 30, 5),
              { heartbeats: 2, input: 150, output: 30, requests: 5 },
            ],
            [
              "the next point again",
              cumulative(S, T(2), 150, 30, 5),
              { heartbeats: 2, input: 150, output: 30, requests: 5 },
            ],
            [
              "the first point once more, after the next",
              cumulative(S, T(1), 100, 20, 2),
              { heartbeats: 2, input: 150, output: 30, requests: 5 },
            ],
            [
              "a reset: the same start, a lower value",
              cumulative(S, T(3), 40, 5, 1),
              { heartbeats: 3, input: 190, output: 35, requests: 6 },
            ],
            [
              "the reset again",
              cumulative(S, T(3), 40, 5, 1),
              { heartbeats: 3, input: 190, output: 35, requests: 6 },
            ],
            [
              "a restart: a new start time, a higher value",
              cumulative(T(3) + 10_000, T(4), 225, 44, 9),
              { heartbeats: 4, input: 415, output: 79, requests: 15 },
            ],
            [
              "the restart again",
              cumulative(T(3) + 10_000, T(4), 225, 44, 9),
              { heartbeats: 4, input: 415, output: 79, requests: 15 },
            ],
            [
              // (each life of a counter is its own series: a later point of the earlier life would
              // be a second writer's, counted; one before its last point adds nothing)
              "an older point of the earlier life, after the restart",
              cumulative(S, T(2) + 30_000, 999, 999, 99),
              { heartbeats: 4, input: 415, output: 79, requests: 15 },
            ],
            [
              "a retry batched with the next interval",
              {
                resourceMetrics: [
                  ...(cumulative(T(3) + 10_000, T(4), 225, 44, 9).resourceMetrics as Json[]),
                  ...(cumulative(T(3) + 10_000, T(5), 300, 50, 10).resourceMetrics as Json[]),
                ],
              },
              { heartbeats: 5, input: 490, output: 85, requests: 16 },
            ],
          ];
          for (const [label, json, expected] of steps) {
            const answer = await exportOk(
              t,
              app,
              "metrics",
              cg.key,
              json,
              encoding,
              `${encoding}, cumulative, ${label}`,
            );
            t.equal(answer.rejected, 0, `${encoding}, cumulative, ${label}: nothing rejected`);
            t.match(await usageOf(cg.id), expected, `${encoding}, cumulative, ${label}: totals`);
          }

          // a counter that ran before the gateway pointed its exporter here is a baseline, then counts
          const bg = await gateway(`resend baseline ${encoding}`);
          const old = now - 3 * DAY;
          await exportOk(
            t,
            app,
            "metrics",
            bg.key,
            cumulative(old, T(1), 100_000, 20_000, 900),
            encoding,
            `${encoding}, an old counter's first point`,
          );
          t.match(
            await usageOf(bg.id),
            { input: 0, output: 0 },
            `${encoding}: a counter started 3 days ago counts from its next point`,
          );
          await exportOk(
            t,
            app,
            "metrics",
            bg.key,
            cumulative(old, T(2), 100_250, 20_050, 905),
            encoding,
            `${encoding}, an old counter's next point`,
          );
          await exportOk(
            t,
            app,
            "metrics",
            bg.key,
            cumulative(old, T(2), 100_250, 20_050, 905),
            encoding,
            `${encoding}, and again`,
          );
          t.match(
            await usageOf(bg.id),
            { input: 250, output: 50, requests: 5 },
            `${encoding}: then its increments, once`,
          );
        }

        // spans: the same batch twice is stored once
        const sg = await gateway("resend spans");
        const batch = tracesRequest([
          {
            resource: { "service.instance.id": "gw-r" },
            spans: [0, 1, 2].map((n) => ({
              traceId: traceIdOf(n),
              spanId: spanIdOf(n),
              start: T(1) + n * 1000,
              end: T(1) + n * 1000 + 800,
              attributes: model("gpt-4o", {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 2,
              }),
            })),
          },
        ]);
        for (const encoding of ENCODINGS) {
          const answer = await exportOk(t, app, "traces", sg.key, batch, encoding, `spans, ${encoding}`);
          t.same(answer, { partial: false, rejected: 0, message: "" }, `spans, ${encoding}: full success`);
          t.match(
            await usageOf(sg.id),
            { heartbeats: 1, input: 30, output: 6, requests: 3 },
            `spans, ${encoding}: stored once`,
          );
        }

        // a retry that lands in the same request as the original (a Collector's batch processor
        // merging an exporter's retry with the export it repeats): the points are the same points
        const twice = (json: Json): Json => ({
          resourceMetrics: [...(json.resourceMetrics as Json[]), ...(json.resourceMetrics as Json[])],
        });
        for (const [label, json, expected] of [
          ["delta", delta, { input: 100, output: 20, requests: 3 }],
          ["cumulative", cumulative(S, T(1), 100, 20, 2), { input: 100, output: 20, requests: 2 }],
        ] as const) {
          const dg = await gateway(`duplicated ${label}`);
          await exportOk(
            t,
            app,
            "metrics",
            dg.key,
            twice(json),
            "protobuf",
            `${label}, twice in one request`,
          );
          t.match(
            await usageOf(dg.id),
            expected,
            `${label}: the same points twice in one request are counted once`,
          );
          await exportOk(t, app, "metrics", dg.key, json, "protobuf", `${label}, then alone`);
          t.match(await usageOf(dg.id), expected, `${label}: and again alone: still once`);
        }
        const dsg = await gateway("duplicated spans");
        await exportOk(
          t,
          app,
          "traces",
          dsg.key,
          { resourceSpans: [...(batch.resourceSpans as Json[]), ...(batch.resourceSpans as Json[])] },
          "protobuf",
          "spans twice in one request",
        );
        t.match(
          await usageOf(dsg.id),
          { input: 30, output: 6, requests: 3 },
          "the same spans twice in one request are counted once",
        );
      },
    );

    await t.test(
      "9. traces: non-GenAI ignored; bad token counts and times rejected; old names read; never counted twice",
      async (t) => {
        const now = Date.now();
        const end = now - 5 * MINUTE;
        let n = 1000;
        const span = (attributes: Record<string, Attr>, o: Partial<SpanSpec> = {}): SpanSpec => {
          n++;
          return { traceId: traceIdOf(n), spanId: spanIdOf(n), start: end - 1500, end, attributes, ...o };
        };

        for (const encoding of ENCODINGS) {
          const gw = await gateway(`spans ${encoding}`);
          const ignoredBefore = await otlpItems(app, "traces", "ignored");
          const plain = tracesRequest([
            {
              resource: { "service.instance.id": "gw-s" },
              spans: [
                span({ "http.request.method": "GET", "url.path": "/health" }, { name: "GET /health" }),
                span({ "db.system.name": "postgresql" }, { name: "SELECT" }),
              ],
            },
          ]);
          const answer = await exportOk(
            t,
            app,
            "traces",
            gw.key,
            plain,
            encoding,
            `${encoding}, non-GenAI spans`,
          );
          t.match(
            answer,
            { partial: true, rejected: 0, message: /2 spans without GenAI attributes ignored/ },
            `${encoding}: ignored, and said so`,
          );
          t.equal(
            (await otlpItems(app, "traces", "ignored")) - ignoredBefore,
            2,
            `${encoding}: counted as ignored in /metrics`,
          );
          t.same(await usageOf(gw.id), NOTHING, `${encoding}: nothing stored`);

          const mixed = tracesRequest([
            {
              resource: { "service.instance.id": "gw-s" },
              spans: [
                span(
                  model("gpt-4o", {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 5,
                  }),
                ),
                span(model("gpt-4o", { "gen_ai.usage.input_tokens": -5 })),
                span(model("gpt-4o", { "gen_ai.usage.input_tokens": 12.5 })),
                span(model("gpt-4o", { "gen_ai.usage.input_tokens": { intValue: "9007199254740993" } })),
                span(
                  model("gpt-4o", { "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": "many" }),
                ),
                span(model("gpt-4o", { "gen_ai.usage.input_tokens": 4 }), { start: end + 2000 }),
                span(model("gpt-4o", { "gen_ai.usage.input_tokens": 4 }), {
                  start: now + 9 * MINUTE,
                  end: now + 10 * MINUTE,
                }),
                span({ "http.request.method": "POST" }),
              ],
            },
          ]);
          const mixedAnswer = await exportOk(
            t,
            app,
            "traces",
            gw.key,
            mixed,
            encoding,
            `${encoding}, bad GenAI spans`,
          );
          t.equal(mixedAnswer.rejected, 6, `${encoding}: the 6 bad GenAI spans rejected (rejected_spans)`);
          for (const why of [
            "3 spans: gen_ai.usage.input_tokens must be a whole number of tokens, from 0 to 1000000000000",
            "1 span: gen_ai.usage.output_tokens must be a whole number of tokens, from 0 to 1000000000000",
            "1 span: start_time_unix_nano is unset or after end_time_unix_nano",
            "1 span: end_time_unix_nano is more than 5 minutes in the future",
            "1 spans without GenAI attributes ignored",
          ])
            t.ok(mixedAnswer.message.includes(why), `${encoding}: the message says "${why}"`);
          t.same(
            await usageOf(gw.id),
            {
              heartbeats: 1,
              tokens: 15,
              input: 10,
              output: 5,
              cacheRead: 0,
              requests: 1,
              models: { "gpt-4o": "10/5" },
            },
            `${encoding}: only the good span stored`,
          );
        }

        // the v1.36-and-earlier names are read like the current ones
        const current = await gateway("spans current names");
        const older = await gateway("spans older names");
        const pair = (names: "current" | "older") =>
          tracesRequest([
            {
              resource: { "service.instance.id": "gw-names" },
              spans: [0, 1].map((i) =>
                span(
                  names === "current"
                    ? {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "anthropic",
                        "gen_ai.request.model": "claude-3-5-sonnet",
                        "gen_ai.usage.input_tokens": 11 + i,
                        "gen_ai.usage.output_tokens": 7,
                        "gen_ai.usage.cache_read.input_tokens": 3,
                      }
                    : {
                        "gen_ai.system": "anthropic",
                        "gen_ai.request.model": "claude-3-5-sonnet",
                        "gen_ai.usage.prompt_tokens": 11 + i,
                        "gen_ai.usage.completion_tokens": 7,
                        "gen_ai.usage.cache_read_input_tokens": 3,
                      },
                  { traceId: traceIdOf(2000 + i), spanId: spanIdOf(2000 + i) },
                ),
              ),
            },
          ]);
        await exportOk(t, app, "traces", current.key, pair("current"), "protobuf", "current names");
        await exportOk(t, app, "traces", older.key, pair("older"), "json", "older names");
        const [a, b] = [await usageOf(current.id), await usageOf(older.id)];
        t.same(
          a,
          {
            heartbeats: 1,
            tokens: 37,
            input: 23,
            output: 14,
            cacheRead: 6,
            requests: 2,
            models: { "claude-3-5-sonnet": "23/14" },
          },
          "current names",
        );
        t.same(b, a, "older names: the same usage");
        t.same(
          (await heartbeatSystems(ta, older.id)).map((s) => s.providers),
          [["anthropic"]],
          "gen_ai.system read as the provider",
        );

        // a connection that exports GenAI token metrics has its usage from them, not again from spans
        for (const encoding of ENCODINGS) {
          const both = await gateway(`metrics and spans ${encoding}`);
          await exportOk(
            t,
            app,
            "metrics",
            both.key,
            metricsRequest([
              {
                resource: { "service.instance.id": "gw-both" },
                metrics: [
                  sumMetric(INPUT, "delta", [
                    { start: end - MINUTE, time: end, asInt: 100, attributes: model("gpt-4o") },
                  ]),
                ],
              },
            ]),
            encoding,
            `${encoding}: token metrics`,
          );
          const spans = tracesRequest([
            {
              resource: { "service.instance.id": "gw-both" },
              spans: [
                span(model("gpt-4o", { "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 9 })),
              ],
            },
          ]);
          const answer = await exportOk(
            t,
            app,
            "traces",
            both.key,
            spans,
            encoding,
            `${encoding}: the same usage as spans`,
          );
          t.match(
            answer,
            {
              partial: true,
              rejected: 0,
              message:
                /token usage is counted from this connection's GenAI metrics; the spans' usage attributes were not counted again/,
            },
            `${encoding}: the spans are not counted again, and the answer says why`,
          );
          t.match(
            await usageOf(both.id),
            { heartbeats: 1, input: 100, output: 0 },
            `${encoding}: the tokens counted once`,
          );
        }

        // a connection exporting only the duration metric still gets its tokens from spans
        const timed = await gateway("duration metric and spans");
        await exportOk(
          t,
          app,
          "metrics",
          timed.key,
          metricsRequest([
            {
              resource: { "service.instance.id": "gw-timed" },
              metrics: [
                histogramMetric(
                  DURATION,
                  "delta",
                  [
                    {
                      start: end - 2 * MINUTE,
                      time: end - MINUTE,
                      count: 1,
                      sum: 1.5,
                      attributes: model("gpt-4o"),
                    },
                  ],
                  "s",
                ),
              ],
            },
          ]),
          "protobuf",
          "duration only",
        );
        await exportOk(
          t,
          app,
          "traces",
          timed.key,
          tracesRequest([
            {
              resource: { "service.instance.id": "gw-timed" },
              spans: [span(model("gpt-4o", { "gen_ai.usage.input_tokens": 21 }))],
            },
          ]),
          "protobuf",
          "spans with tokens",
        );
        t.match(
          await usageOf(timed.id),
          { heartbeats: 2, input: 21 },
          "the spans' tokens counted: no token metrics to prefer",
        );
      },
    );

    await t.test("10. one tenant never sees another's data", async (t) => {
      const alice = await newGateway(app, w.keys.aliceOrgA, "org A gateway");
      const now = Date.now();
      const S = now - 20 * MINUTE;
      const exportOf = (time: number, input: number, extra: Record<string, Attr> = {}) =>
        metricsRequest([
          {
            resource: { "service.instance.id": "gw-shared-name", ...extra },
            metrics: [
              sumMetric(INPUT, "cumulative", [{ start: S, time, asInt: input, attributes: model("gpt-4o") }]),
            ],
          },
        ]);
      const bobBefore = await usageOf(w.conns.OB);
      // the same series, instance and times from two tenants: each connection counts its own
      await exportOk(t, app, "metrics", w.keys.ingest, exportOf(S + MINUTE, 100), "protobuf", "org B's key");
      await exportOk(
        t,
        app,
        "metrics",
        alice.key,
        exportOf(S + MINUTE, 100, { "vigil.connection.id": w.conns.OB }),
        "json",
        "org A's key",
      );
      await exportOk(
        t,
        app,
        "metrics",
        alice.key,
        exportOf(S + 2 * MINUTE, 160, { "vigil.connection.id": w.conns.OB }),
        "protobuf",
        "org A's key, the next point",
      );
      const bob = await usageOf(w.conns.OB);
      const aliceUsage = await usage(app, w.keys.aliceOrgA, alice.id);
      t.equal(bob.input - bobBefore.input, 100, "org B's gateway has only its own export");
      t.equal(bob.heartbeats - bobBefore.heartbeats, 1, "one heartbeat in org B");
      t.match(
        aliceUsage,
        { heartbeats: 2, input: 160 },
        "org A's gateway has its two, whatever the resource attributes say",
      );

      for (const [label, key, id] of [
        ["org A's owner reading org B's gateway", w.keys.aliceOrgA, w.conns.OB],
        ["org B's owner reading org A's gateway", owner, alice.id],
        ["org B's ingestion key reading usage", w.keys.ingest, alice.id],
      ] as const) {
        const res = await call(app, key, "PUT", `/v1/usage?connection_id=${id}`);
        t.ok(res.statusCode === 404 || res.statusCode === 403, `${label}: ${res.statusCode}`);
        t.notMatch(res.body, /"input_tokens"/, `${label}: no usage in the answer`);
      }
    });
  });
}
