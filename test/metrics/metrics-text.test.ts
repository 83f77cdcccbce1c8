import t, { type Test } from "tap";
import client from "prom-client";
import { type Aggregator, exposition, mergeExpositions } from "../../src/lib/metrics-text.js";

/**
 * Vigil writes the text of a scrape itself (src/lib/metrics-text.ts, for speed). A scraper must
 * read exactly what prom-client would have written: the same families, labels, escapes and values,
 * byte for byte, whatever the metric kinds, label values and sizes.
 */

/** A registry with every kind of metric and label value a scrape can hold. */
function filled(): client.Registry {
  const registry = new client.Registry();
  const requests = new client.Counter({
    name: "t_requests_total",
    help: 'Requests, by route (with "quotes", a back\\slash and a\nnew line in the help).',
    labelNames: ["route", "method", "status_code"] as const,
    registers: [registry],
  });
  requests.labels("/v1/connections/:id", "GET", "200").inc(3);
  requests.labels('/we"ird\\path\nwith a new line', "POST", "400").inc();
  requests.labels("/ünïcödé/…", "GET", "404").inc(0.5);
  requests.inc({ route: "/plain", method: "GET", status_code: "500" }, 1e21);

  new client.Counter({ name: "t_unlabelled_total", help: "No labels.", registers: [registry] }).inc(7);
  new client.Counter({ name: "t_empty_total", help: "Never counted.", registers: [registry] });
  new client.Counter({
    name: "t_empty_labelled_total",
    help: "Labelled, never counted.",
    labelNames: ["kind"] as const,
    registers: [registry],
  });

  const gauge = new client.Gauge({
    name: "t_depth",
    help: "A gauge set by its collect function.",
    labelNames: ["channel"] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.set({ channel: "email" }, 4);
      this.set({ channel: "slack" }, -2.25);
    },
  });
  void gauge;
  const odd = new client.Gauge({
    name: "t_odd",
    help: "Values that are not plain numbers.",
    labelNames: ["v"] as const,
    registers: [registry],
  });
  odd.set({ v: "nan" }, Number.NaN);
  odd.set({ v: "inf" }, Number.POSITIVE_INFINITY);
  odd.set({ v: "-inf" }, Number.NEGATIVE_INFINITY);
  odd.set({ v: "tiny" }, 1e-7);

  const duration = new client.Histogram({
    name: "t_duration_seconds",
    help: "A labelled histogram.",
    labelNames: ["route", "method"] as const,
    buckets: [0.005, 0.025, 0.1, 1, 5],
    registers: [registry],
  });
  for (let i = 0; i < 50; i++) duration.labels(`/r/${i % 7}`, i % 2 ? "GET" : "PUT").observe(i / 10);
  duration.labels('/q"uote', "GET").observe(100);
  const lag = new client.Histogram({
    name: "t_lag_seconds",
    help: "An unlabelled histogram.",
    buckets: [0.01, 0.5, 10],
    registers: [registry],
  });
  for (let i = 0; i < 20; i++) lag.observe(i / 3);
  new client.Histogram({
    name: "t_unused_seconds",
    help: "Never observed.",
    buckets: [1],
    registers: [registry],
  });

  const summary = new client.Summary({
    name: "t_summary_seconds",
    help: "A summary.",
    labelNames: ["job"] as const,
    percentiles: [0.5, 0.99],
    registers: [registry],
  });
  for (let i = 0; i < 30; i++) summary.labels(i % 2 ? "rollups" : "retention").observe(i);
  return registry;
}

t.test("the text equals prom-client's for every kind of metric and label value", async (t: Test) => {
  const registry = filled();
  const want = await registry.metrics();
  const got = await exposition(registry);
  t.ok(Buffer.isBuffer(got));
  t.equal(got.toString("utf8"), want);
  t.match(want, /route="\/we\\"ird\\\\path\\nwith a new line"/, "the escapes are in what was compared");
  t.match(want, /t_odd\{v="nan"\} Nan/);
  // the labels' texts are kept between scrapes: a second scrape after more counting is still equal
  registry.getSingleMetric("t_requests_total");
  (registry.getSingleMetric("t_requests_total") as client.Counter)
    .labels("/v1/connections/:id", "GET", "200")
    .inc();
  (registry.getSingleMetric("t_duration_seconds") as client.Histogram).labels("/r/new", "GET").observe(0.01);
  t.equal(
    (await exposition(registry)).toString("utf8"),
    await registry.metrics(),
    "equal on the next scrape too",
  );
});

t.test("a scrape larger than one piece (thousands of series) is whole and in order", async (t: Test) => {
  const registry = filled();
  const big = new client.Histogram({
    name: "t_big_seconds",
    help: "Many label sets.",
    labelNames: ["route", "method"] as const,
    buckets: [0.005, 0.025, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  for (let i = 0; i < 600; i++)
    big.labels(`/v1/a/rather/long/route/template/${i}/{id}`, "GET").observe(i / 100);
  const want = await registry.metrics();
  t.ok(want.length > 100_000, `${want.length} characters: many pieces`);
  t.equal((await exposition(registry)).toString("utf8"), want);
});

t.test("an empty registry", async (t: Test) => {
  const registry = new client.Registry();
  t.equal((await exposition(registry)).toString("utf8"), await registry.metrics());
});

/** Two processes' registries (`vigil serve --workers 2`): the same metrics, different values. */
function worker(n: number): client.Registry {
  const registry = new client.Registry();
  const requests = new client.Counter({
    name: "t_requests_total",
    help: "Requests.",
    labelNames: ["route", "status_code"] as const,
    registers: [registry],
  });
  requests.labels("/v1/usage", "200").inc(10 * n);
  requests.labels(`/only/in/worker/${n}`, "404").inc(n);
  requests.labels('/q"uote', "400").inc(0.1 * n);
  const duration = new client.Histogram({
    name: "t_duration_seconds",
    help: "Durations.",
    labelNames: ["route"] as const,
    buckets: [0.01, 0.1, 1],
    registers: [registry],
  });
  for (let i = 0; i < 10 * n; i++) duration.labels(i % 2 ? "/a" : "/b").observe(i / (7 * n));
  duration.labels(`/w${n}`).observe(n);
  const gauge = (name: string, aggregator: string, value: number) =>
    new client.Gauge({
      name,
      help: `A gauge aggregated by ${aggregator}.`,
      aggregator: aggregator as "sum",
      registers: [registry],
    }).set(value);
  gauge("t_lag_mean", "average", 3 * n);
  gauge("t_lag_min", "min", 10 - n);
  gauge("t_lag_max", "max", n * n);
  gauge("t_version", "first", 20 + n);
  gauge("t_started", "omit", 1_700_000_000 + n);
  gauge("t_inf", "sum", n === 1 ? Number.POSITIVE_INFINITY : 1);
  return registry;
}

/** A text's samples, with each label set's labels in name order (the aggregators order them differently). */
function samplesOf(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    const m = /^([^{]+)(?:\{(.*)\})?$/.exec(line.slice(0, space)) as RegExpExecArray;
    const labels = m[2] ? (m[2].match(/\w+="(?:[^"\\]|\\.)*"/g) ?? []).sort().join(",") : "";
    out.set(`${m[1]}{${labels}}`, line.slice(space + 1));
  }
  return out;
}

t.test(
  "the workers' texts merged give prom-client's cluster aggregation, sample for sample",
  async (t: Test) => {
    const workers = [worker(1), worker(2), worker(3)];
    const want = await client.AggregatorRegistry.aggregate(
      await Promise.all(workers.map((w) => w.getMetricsAsJSON())),
    ).metrics();
    const texts = await Promise.all(workers.map(async (w) => (await exposition(w)).toString("utf8")));
    const aggregators = new Map(
      (workers[0] as client.Registry)
        .getMetricsAsArray()
        .map((m) => [m.name, (m as unknown as { aggregator: Aggregator }).aggregator]),
    );
    const got = mergeExpositions(texts, (name) => aggregators.get(name) ?? "sum").toString("utf8");
    t.same(samplesOf(got), samplesOf(want));
    t.same(
      [...got.matchAll(/^# (?:HELP|TYPE) .*$/gm)].map((m) => m[0]),
      [...want.matchAll(/^# (?:HELP|TYPE) .*$/gm)].map((m) => m[0]),
      "the same families, help texts and types, in the same order",
    );
    // the figures themselves, not only their agreement
    const s = samplesOf(got);
    t.equal(s.get('t_requests_total{route="/v1/usage",status_code="200"}'), "60", "a counter: summed");
    t.equal(
      s.get('t_requests_total{route="/only/in/worker/2",status_code="404"}'),
      "2",
      "a label set one worker has",
    );
    t.equal(s.get('t_duration_seconds_count{route="/a"}'), "30", "a histogram's count: summed");
    t.equal(s.get("t_lag_mean{}"), "6", "average");
    t.equal(s.get("t_lag_min{}"), "7", "min");
    t.equal(s.get("t_lag_max{}"), "9", "max");
    t.equal(s.get("t_version{}"), "21", "first: the first worker's");
    t.equal(s.get("t_inf{}"), "+Inf");
    t.notOk(got.includes("t_started"), "an omitted family is left out");
  },
);

t.test("no worker texts: an empty scrape", async (t: Test) => {
  t.equal(mergeExpositions([], () => "sum").toString("utf8"), "\n");
});
