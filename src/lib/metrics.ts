import cluster from "node:cluster";
import { timingSafeEqual } from "node:crypto";
import client from "prom-client";
import { type Aggregator, exposition, mergeExpositions } from "./metrics-text.js";

/**
 * Vigil's own metrics, in Prometheus's text format (docs/operations.md: "Watching Vigil itself").
 *
 * Every metric lives in prom-client's default registry, so the cluster aggregator of
 * `vigil serve --workers N` (src/cluster.ts, src/metrics-server.ts) can sum the whole process group. Labels are
 * bounded sets only: route templates, methods, status codes, store kinds, platform kinds, check
 * outcomes, job and channel names. No connection, account, user or key id is ever a label, so
 * the series count does not grow with the fleet (test/metrics/metrics.test.ts).
 *
 * The features count through the helpers below; they never see prom-client.
 */

const register = client.register;

/** Seconds buckets for store statements: 1 ms to 10 s. */
const FAST = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

export const httpRequests = new client.Counter({
  name: "vigil_http_requests_total",
  help: "HTTP requests answered, by route template, method and status code.",
  labelNames: ["route", "method", "status_code"] as const,
});

export const httpDuration = new client.Histogram({
  name: "vigil_http_request_duration_seconds",
  help: "How long HTTP requests took to answer, by route template and method (statuses: vigil_http_requests_total).",
  labelNames: ["route", "method"] as const,
  // a scrape prints every bucket of every route and method: few buckets, and no status label
  // (that is the counter's), keep a scrape of a busy Vigil within a few milliseconds (bench metrics)
  buckets: [0.005, 0.025, 0.1, 0.25, 1, 5],
});

export const heartbeatsIngested = new client.Counter({
  name: "vigil_heartbeats_ingested_total",
  help: "Gateway heartbeats accepted and stored.",
});

export const otlpPoints = new client.Counter({
  name: "vigil_otlp_items_total",
  help: "OTLP data points (metrics) and spans (traces) received, by what became of them: stored, rejected (partial success) or ignored (not GenAI).",
  labelNames: ["signal", "outcome"] as const,
});

export const usageEntriesIngested = new client.Counter({
  name: "vigil_usage_entries_ingested_total",
  help: "Usage entries accepted and stored (PUT /v1/usage).",
});

export const seriesRowsWritten = new client.Counter({
  name: "vigil_series_rows_written_total",
  help: "Series rows committed to the series store, by store.",
  labelNames: ["store"] as const,
});

export const seriesCommitRows = new client.Histogram({
  name: "vigil_series_commit_rows",
  help: "Rows per group commit of the series store (one flush carries every write queued meanwhile).",
  labelNames: ["store"] as const,
  buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 50000],
});

export const seriesCommitErrors = new client.Counter({
  name: "vigil_series_commit_errors_total",
  help: "Group commits of the series store that failed (their writers got an error), by store.",
  labelNames: ["store"] as const,
});

/** Every series store's group commit of this process, held weakly: a closed store is forgotten. */
const backlogSources = new Set<{ store: string; commit: WeakRef<{ readonly backlog: number }> }>();
new client.Gauge({
  name: "vigil_ingest_backlog_rows",
  help: "Series rows accepted for writing and not yet committed (heartbeats are refused with 503 past INGEST_MAX_BACKLOG_ROWS).",
  labelNames: ["store"] as const,
  collect() {
    this.reset();
    for (const source of backlogSources) {
      const commit = source.commit.deref();
      if (commit) this.inc({ store: source.store }, commit.backlog);
      else backlogSources.delete(source);
    }
  },
});

/** A series store's group commit, whose backlog the gauge reports while the store lives. */
export function watchBacklog(store: string, commit: { readonly backlog: number }): void {
  backlogSources.add({ store, commit: new WeakRef(commit) });
}

/** Counts a series store's flushes: rows committed and commit sizes, or a failed commit. */
export function seriesCommitObserver(store: string): (rows: number, ok: boolean) => void {
  const written = seriesRowsWritten.labels(store);
  const sizes = seriesCommitRows.labels(store);
  const failed = seriesCommitErrors.labels(store);
  return (rows, ok) => {
    if (ok) {
      written.inc(rows);
      sizes.observe(rows);
    } else failed.inc();
  };
}

export const probeChecks = new client.Counter({
  name: "vigil_probe_checks_total",
  help: "Platform checks made, by platform kind and outcome (up, or the failure's reason).",
  labelNames: ["kind", "outcome"] as const,
});

export const probeScheduleLag = new client.Histogram({
  name: "vigil_probe_schedule_lag_seconds",
  help: "How late each check started after the slot it was due.",
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
});

export const syncRequests = new client.Counter({
  name: "vigil_sync_requests_total",
  help: "Requests of execution syncs (list pages, runs read by id, failure details), by platform kind.",
  labelNames: ["kind"] as const,
});

export const syncRuns = new client.Counter({
  name: "vigil_sync_runs_total",
  help: "Execution syncs that asked the platform, by platform kind and outcome (synced: caught up or continuing by budget; stopped: throttled, failed or out of time).",
  labelNames: ["kind", "outcome"] as const,
});

export const storeQueryDuration = new client.Histogram({
  name: "vigil_store_query_duration_seconds",
  help: "Statements sent to a store and how long they took, by store (postgres, pglite, questdb).",
  labelNames: ["store"] as const,
  buckets: FAST,
});

export const storeQueryErrors = new client.Counter({
  name: "vigil_store_query_errors_total",
  help: "Statements a store failed or refused, by store.",
  labelNames: ["store"] as const,
});

/**
 * Times a store's statements: `const done = timer(); … done(ok)` observes the duration and, when
 * not ok, counts an error. One bound child per store, so a statement costs no label lookup.
 */
export function storeTimer(store: string): () => (ok: boolean) => void {
  const duration = storeQueryDuration.labels(store);
  const errors = storeQueryErrors.labels(store);
  return () => {
    const start = performance.now();
    return (ok) => {
      duration.observe((performance.now() - start) / 1000);
      if (!ok) errors.inc();
    };
  };
}

const depthSources = new Set<() => Promise<{ channel: string; rows: number }[]>>();
new client.Gauge({
  name: "vigil_outbox_depth",
  help: "Notifications waiting to be sent (due or retrying), by channel (email, webhook, slack, …); reported by the process that runs the jobs role.",
  labelNames: ["channel"] as const,
  async collect() {
    this.reset();
    for (const source of depthSources) {
      try {
        for (const { channel, rows } of await source()) this.inc({ channel }, rows);
      } catch {
        // a store that is down: the depth is unknown, so no sample rather than a wrong one
      }
    }
  },
});

/** Registers where the outbox depths are read (the jobs role); returns the function that removes it. */
export function watchOutboxes(source: () => Promise<{ channel: string; rows: number }[]>): () => void {
  depthSources.add(source);
  return () => depthSources.delete(source);
}

export const deliveries = new client.Counter({
  name: "vigil_deliveries_total",
  help: "Notification delivery attempts, by channel (email, webhook, slack, teams, …) and outcome (delivered, retry, given_up).",
  labelNames: ["channel", "outcome"] as const,
});

export const jobRuns = new client.Counter({
  name: "vigil_job_runs_total",
  help: "Periodic job runs, by job and outcome (ran; skipped: another node held its lock or ran it this period; failed).",
  labelNames: ["job", "outcome"] as const,
});

export const jobDuration = new client.Histogram({
  name: "vigil_job_duration_seconds",
  help: "How long periodic job runs took, by job (every outcome).",
  labelNames: ["job"] as const,
  buckets: [0.005, 0.025, 0.1, 0.5, 1, 5, 15, 60, 300],
});

export const anomalyEvaluations = new client.Counter({
  name: "vigil_anomaly_evaluations_total",
  help: "Series windows the anomaly detector scored against their 7-day baselines.",
});

export const budgetEvaluations = new client.Counter({
  name: "vigil_budget_evaluations_total",
  help: "Budgets evaluated against their month's spend.",
});

export const sloBurnEvaluations = new client.Counter({
  name: "vigil_slo_burn_evaluations_total",
  help: "SLOs whose burn rates the SLO job judged against the multi-window alert conditions.",
});

client.collectDefaultMetrics({ register });

/** A worker's answer to the primary's request for its metrics (`clusterMetricsSource`). */
interface MetricsTextMessage {
  vigil: "metrics-text";
  id: number;
  text?: string;
  error?: string;
}

// A worker of `vigil serve --workers N` sends the primary its metrics' text when asked, so one
// scrape of the primary covers the group.
if (cluster.isWorker)
  process.on("message", (m: { vigil?: string; id?: unknown } | null) => {
    if (m?.vigil !== "metrics-text-request" || typeof m.id !== "number") return;
    const id = m.id;
    const reply = (msg: MetricsTextMessage) => {
      if (process.connected) process.send?.(msg);
    };
    processMetrics().then(
      (body) => reply({ vigil: "metrics-text", id, text: body.toString("utf8") }),
      (err: unknown) => reply({ vigil: "metrics-text", id, error: (err as Error).message }),
    );
  });

/** This process's metrics, in the text format (UTF-8). */
export function processMetrics(): Promise<Buffer> {
  return exposition(register);
}

/** A scrape's body: text, or the same text encoded. */
export type MetricsBody = string | Buffer;

let source: () => Promise<MetricsBody> = processMetrics;

/**
 * Where a scrape's text comes from: this process's metrics, or (a worker of `--workers N`) the
 * whole group's, asked of the primary.
 */
export function setMetricsSource(fn: () => Promise<MetricsBody>): void {
  source = fn;
}

/** The text a scrape answers. */
export function metricsText(): Promise<MetricsBody> {
  return source();
}

/** How long the primary waits for every worker's metrics (prom-client's cluster aggregator waits 5 s too). */
const GROUP_WAIT_MS = 5_000;

/** A metric family's aggregator across processes, as its definition says (prom-client: sum by default). */
function aggregatorOf(family: string): Aggregator {
  const metric = register.getSingleMetric(family) as { aggregator?: Aggregator } | undefined;
  return metric?.aggregator ?? "sum";
}

/**
 * The primary's side of `--workers N`: every live worker's metrics, asked over IPC and combined
 * by each metric's aggregator (counters and histograms summed, as prom-client's cluster
 * aggregator does; `mergeExpositions`). Fails when a worker reports an error or some worker has
 * not answered within 5 s; with no worker up, the text is empty.
 */
export function clusterMetricsSource(): () => Promise<MetricsBody> {
  let asked = 0;
  const pending = new Map<
    number,
    { texts: Map<number, string>; waiting: number; done: (err?: Error) => void }
  >();
  cluster.on("message", (worker, m: MetricsTextMessage | null) => {
    if (m?.vigil !== "metrics-text") return;
    const request = pending.get(m.id);
    if (!request) return; // answered after the scrape gave up
    if (typeof m.text !== "string") return request.done(new Error(m.error ?? "a worker sent no metrics"));
    request.texts.set(worker.id, m.text);
    if (--request.waiting === 0) request.done();
  });
  return () =>
    new Promise<MetricsBody>((resolve, reject) => {
      const workers = Object.values(cluster.workers ?? {}).filter((w) => w?.isConnected());
      if (workers.length === 0) return resolve("");
      const id = ++asked;
      const texts = new Map<number, string>();
      const timer = setTimeout(
        () => request.done(new Error("a worker did not send its metrics in time")),
        GROUP_WAIT_MS,
      );
      const request = {
        texts,
        waiting: workers.length,
        done: (err?: Error) => {
          if (!pending.delete(id)) return;
          clearTimeout(timer);
          if (err) return reject(err);
          // in worker order, whatever order they answered in ("first" takes the first worker's)
          const ordered = [...texts].sort((a, b) => a[0] - b[0]).map(([, text]) => text);
          resolve(mergeExpositions(ordered, aggregatorOf));
        },
      };
      pending.set(id, request);
      for (const w of workers) w?.send({ vigil: "metrics-text-request", id });
    });
}

export const METRICS_CONTENT_TYPE = register.contentType;

/** Whether `header` is `Bearer <token>` (METRICS_TOKEN), compared in constant time. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer +(\S+)\s*$/i.exec(header ?? "");
  if (!m) return false;
  const given = Buffer.from(m[1] as string);
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}
