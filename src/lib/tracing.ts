import type { Attributes, SpanStatusCode, Tracer } from "@opentelemetry/api";

/**
 * Traces (issue #33), optional and off by default: OpenTelemetry's Node SDK, exporting by OTLP
 * once `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set and
 * `OTEL_SDK_DISABLED` is not `true`. Spans: HTTP requests (the route from @fastify/otel), pg
 * queries inside a request or one of Vigil's spans, undici requests (probes, syncs, webhooks),
 * and Vigil's own through `traced` (see docs/operations.md: Traces).
 *
 * The OTEL_* variables are OpenTelemetry's, not Vigil's: the SDK reads them itself (protocol,
 * headers, sampler, service name, resource), and they must be read before src/config.ts and
 * everything else is imported, because the SDK patches pg and node:http as they are first
 * required. That is why this module reads `process.env` and why src/cli.ts starts it before it
 * imports the rest.
 *
 * Off, nothing of the SDK or the API is loaded: `traced` wrappers see no tracer and call the
 * function they wrap, with no span, context or closure made per call.
 */

/** Set once the SDK has started; undefined when tracing is off. */
let tracer: Tracer | undefined;
let statusError = 2 as SpanStatusCode; // SpanStatusCode.ERROR, read from the API once loaded
let shutdownSdk: (() => Promise<void>) | undefined;

export type TracingState = { on: true; endpoint: string } | { on: false; reason: string; error?: string };

/** Paths not traced: health checks and scrapes, asked every few seconds, would drown the rest. */
const UNTRACED_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

const SHUTDOWN_TIMEOUT_MS = 5_000;

type Env = Record<string, string | undefined>;

/** Whether the environment asks for traces; the SDK reads the other OTEL_* variables itself. */
export function tracingWanted(
  env: Env,
): { wanted: true; endpoint: string } | { wanted: false; reason: string } {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true")
    return { wanted: false, reason: "OTEL_SDK_DISABLED=true" };
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint) return { wanted: false, reason: "OTEL_EXPORTER_OTLP_ENDPOINT is unset" };
  return { wanted: true, endpoint: shown(endpoint) };
}

/** The endpoint as logged: its origin, without a user or password it may carry. */
function shown(endpoint: string): string {
  try {
    return new URL(endpoint).origin;
  } catch {
    return "(not a URL)";
  }
}

/**
 * Starts the SDK when the environment asks for it. Call before pg, node:http's users (fastify)
 * and undici are imported. A failure to start leaves tracing off (monitoring goes on) and is
 * returned for the caller to log.
 */
export async function startTracing(env: Env = process.env): Promise<TracingState> {
  const want = tracingWanted(env);
  if (!want.wanted) return { on: false, reason: want.reason };
  try {
    const [
      api,
      { NodeSDK },
      { HttpInstrumentation },
      { PgInstrumentation },
      { UndiciInstrumentation },
      otel,
    ] = await Promise.all([
      import("@opentelemetry/api"),
      import("@opentelemetry/sdk-node"),
      import("@opentelemetry/instrumentation-http"),
      import("@opentelemetry/instrumentation-pg"),
      import("@opentelemetry/instrumentation-undici"),
      import("@fastify/otel"),
    ]);
    const named =
      Boolean(env.OTEL_SERVICE_NAME) || /(^|,)\s*service\.name=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? "");
    const sdk = new NodeSDK({
      ...(named ? {} : { serviceName: "vigil" }),
      // Traces only: Vigil's metrics are Prometheus's (/metrics), its logs pino's.
      metricReaders: [],
      logRecordProcessors: [],
      instrumentations: [
        new HttpInstrumentation({
          ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.has((req.url ?? "").split("?")[0] ?? ""),
          // a path may carry a secret (an invitation's token), a query an OAuth code
          startIncomingSpanHook: (req) => incomingUrlAttributes((req as { url?: string }).url ?? ""),
        }),
        // Hooks fastify's start (a diagnostics channel): no change to the app. Names the
        // request span by its route and gives the HTTP span `http.route`.
        new otel.FastifyOtelInstrumentation({
          registerOnInitialization: true,
          ignorePaths: (route) => UNTRACED_PATHS.has(route.url),
          // its span records the raw URL: the route template instead (no token, no query)
          requestHook: (
            span: { setAttribute(k: string, v: string): unknown },
            request: { url: string; routeOptions?: { url?: string } },
          ) => {
            span.setAttribute(
              "url.path",
              request.routeOptions?.url ?? incomingUrlAttributes(request.url)["url.path"],
            );
          },
        }),
        // Only inside a request or one of Vigil's spans: the pollers' queries (claims, leases,
        // the outbox), several a second, would otherwise each be a trace of their own.
        // Statements are sent as text with placeholders; values are never recorded.
        new PgInstrumentation({ requireParentSpan: true }),
        // outbound URLs hold secrets (a Slack or Discord webhook's path, a Telegram bot token, a
        // Teams signature, a signed webhook's URL): the origin only
        new UndiciInstrumentation({ startSpanHook: (request) => outgoingUrlAttributes(request.origin) }),
      ],
    });
    sdk.start();
    tracer = api.trace.getTracer("vigil");
    statusError = api.SpanStatusCode.ERROR;
    shutdownSdk = () => sdk.shutdown();
    return { on: true, endpoint: want.endpoint };
  } catch (err) {
    return { on: false, reason: "the OpenTelemetry SDK did not start", error: (err as Error).message };
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A request path as a span may record it: a segment that may be a secret (16 characters or more
 * with a digit in it, and not a UUID: an invitation's token, a key) becomes `{redacted}`; the
 * query string is left out whole (it may hold an OAuth code), replaced by `{redacted}` when there
 * was one.
 */
export function incomingUrlAttributes(url: string): Record<string, string> {
  const q = url.indexOf("?");
  const path = (q === -1 ? url : url.slice(0, q))
    .split("/")
    .map((seg) => (seg.length >= 16 && /\d/.test(seg) && !UUID.test(seg) ? "{redacted}" : seg))
    .join("/");
  return q === -1 ? { "url.path": path } : { "url.path": path, "url.query": "{redacted}" };
}

/** An outbound request as a span records it: its origin, never its path or query. */
export function outgoingUrlAttributes(origin: string | URL): Record<string, string> {
  const o = String(origin).replace(/\/+$/, "");
  return { "url.full": o, "url.path": "{redacted}", "url.query": "" };
}

/** Exports the spans still buffered and stops the SDK (graceful shutdown); bounded, never throws. */
export async function stopTracing(): Promise<void> {
  const stop = shutdownSdk;
  if (!stop) return;
  shutdownSdk = undefined;
  tracer = undefined;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    stop().catch(() => {}),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_TIMEOUT_MS))),
  ]);
  clearTimeout(timer);
}

export interface SpanOptions<A extends unknown[], R> {
  /** A trace of its own instead of a child of the caller's span: work done for many callers. */
  root?: boolean;
  /** Attributes from the arguments. No secrets: ids and counts only. */
  attributes?: (...args: A) => Attributes;
  /** Attributes from the result. */
  result?: (value: R) => Attributes;
}

/**
 * `fn` in a span named `name` while tracing is on (active, so pg and undici spans nest under
 * it; an error thrown sets the span's status), and `fn` itself while it is off. Wrap once, where
 * the function is defined, so the off path allocates nothing per call but the arguments.
 */
export function traced<A extends unknown[], R>(
  name: string,
  opts: SpanOptions<A, R>,
  fn: (...args: A) => Promise<R>,
): (...args: A) => Promise<R> {
  return (...args) => (tracer === undefined ? fn(...args) : inSpan(tracer, name, fn, args, opts));
}

function inSpan<A extends unknown[], R>(
  t: Tracer,
  name: string,
  fn: (...args: A) => Promise<R>,
  args: A,
  opts: SpanOptions<A, R>,
): Promise<R> {
  const attributes = opts.attributes?.(...args);
  return t.startActiveSpan(
    name,
    { root: opts.root ?? false, ...(attributes ? { attributes } : {}) },
    async (span) => {
      try {
        const value = await fn(...args);
        if (opts.result) span.setAttributes(opts.result(value));
        return value;
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        span.recordException(e);
        span.setStatus({ code: statusError, message: e.message });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}
