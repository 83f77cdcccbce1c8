import t from "tap";
import { decodeMetricsRequest } from "../../src/otlp/decode.js";
import { digest, identityText, mapMetrics } from "../../src/otlp/map.js";
import { encodeRequest, type Json, metricsRequest, sumMetric } from "../helpers/otlp-bodies.js";

/*
 * mapMetrics remembers each metric's series keys by the points' positions in the last export
 * (an exporter sends the same series in the same order). A remembered key is reused only for the
 * same attributes, start and temporality: whatever the next export holds at a position, each
 * point's key is the one its own identity gives.
 */

const INPUT = "gen_ai.client.inference.usage.input_tokens";

t.test("series keys stay each point's own, whatever was at its position before", async (t) => {
  const now = Date.now();
  const start = now - 3_600_000;
  const request = (
    points: { attributes: Record<string, string | number | boolean>; start?: number }[],
    temporality: "cumulative" | "delta" = "cumulative",
  ): Json =>
    metricsRequest([
      {
        resource: { "service.instance.id": "gw-memo" },
        metrics: [
          sumMetric(
            INPUT,
            temporality,
            points.map((p) => ({
              start: p.start ?? start,
              time: now - 1000,
              asInt: 5,
              attributes: p.attributes,
            })),
          ),
        ],
      },
    ]);
  const keys = (body: Json) => {
    const req = decodeMetricsRequest(encodeRequest("metrics", body, "protobuf"), "protobuf");
    return mapMetrics(req, now).points.map((p) => p.seriesKey);
  };
  // what each point's key must be: its own identity, computed here without any memory
  const own = (body: Json) => {
    const req = decodeMetricsRequest(encodeRequest("metrics", body, "protobuf"), "protobuf");
    const points = mapMetrics(req, now).points;
    return req.resourceMetrics[0]?.scopeMetrics[0]?.metrics[0]?.dataPoints.map((dp, i) => {
      const prefix = points[i]?.metricPrefix ?? "";
      const cumulative = points[i]?.cumulative ?? false;
      const text = prefix + identityText(dp.attributes);
      return cumulative ? digest(`${text}\n${dp.startTimeUnixNano}`) : text;
    });
  };
  const a = { "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai" };
  const b = { "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai" };
  const cases: [string, Json][] = [
    ["first export", request([{ attributes: a }, { attributes: b }])],
    ["the same again (remembered)", request([{ attributes: a }, { attributes: b }])],
    ["swapped positions", request([{ attributes: b }, { attributes: a }])],
    ["one attribute more", request([{ attributes: { ...b, "server.port": 443 } }, { attributes: a }])],
    [
      "one attribute less",
      request([{ attributes: { "gen_ai.request.model": "gpt-4o-mini" } }, { attributes: a }]),
    ],
    [
      "a number where a string was",
      request([{ attributes: { "gen_ai.request.model": 4 } }, { attributes: a }]),
    ],
    [
      "a new start time",
      request([{ attributes: { "gen_ai.request.model": 4 }, start: start + 1 }, { attributes: a }]),
    ],
    ["delta temporality", request([{ attributes: a }, { attributes: b }], "delta")],
    ["cumulative again", request([{ attributes: a }, { attributes: b }])],
  ];
  const seen = new Map<string, string>();
  for (const [name, body] of cases) {
    const got = keys(body);
    t.same(got, own(body), `${name}: each point's key is its own identity's`);
    for (const k of got) seen.set(k, name);
  }
  t.equal(new Set(keys(cases[0]?.[1] as Json)).size, 2, "two series, two keys");
  t.ok(seen.size >= 7, `distinct identities give distinct keys (${seen.size})`);
});
