import path from "node:path";
import { z } from "zod";

/**
 * The whole runtime configuration, parsed once at start-up from the environment.
 * Nothing outside this module reads `process.env`: everything else receives a `Config`.
 */

const emptyToUndefined = (v: unknown) => (typeof v === "string" && v.trim() === "" ? undefined : v);

const url = (protocols: string[], example: string) =>
  z.preprocess(
    emptyToUndefined,
    z
      .string()
      .refine(
        (v) => {
          try {
            return protocols.includes(new URL(v).protocol);
          } catch {
            return false;
          }
        },
        `must be a ${protocols.join(" or ")} URL, for example ${example}`,
      )
      .optional(),
  );

const port = z.preprocess(
  emptyToUndefined,
  z.coerce
    .number({ error: "must be a port number" })
    .int("must be a whole number")
    .min(0, "must be between 0 and 65535")
    .max(65535, "must be between 0 and 65535")
    .default(8080),
);

const intVar = (min: number, max: number, dflt: number) =>
  z.preprocess(
    emptyToUndefined,
    z.coerce
      .number({ error: "must be a whole number" })
      .int("must be a whole number")
      .min(min, `must be at least ${min}`)
      .max(max, `must be at most ${max}`)
      .default(dflt),
  );

const boolVar = (dflt: boolean) =>
  z.preprocess(
    (v) => (typeof v === "string" ? emptyToUndefined(v.trim().toLowerCase()) : v),
    z
      .enum(["true", "false", "1", "0"], { error: "must be true or false" })
      .transform((v) => v === "true" || v === "1")
      .default(dflt),
  );

export const envSchema = z.object({
  DATABASE_URL: url(["postgres:", "postgresql:"], "postgres://user:pass@127.0.0.1:5432/vigil"),
  QUESTDB_URL: url(["http:", "https:"], "http://127.0.0.1:9000"),
  QUESTDB_PG_URL: url(["postgres:", "postgresql:"], "postgres://admin:quest@127.0.0.1:8812/qdb"),
  PORT: port,
  HOST: z.preprocess(emptyToUndefined, z.string().min(1).default("127.0.0.1")),
  PUBLIC_URL: url(["http:", "https:"], "https://vigil.example.com"),
  VIGIL_DATA_DIR: z.preprocess(emptyToUndefined, z.string().min(1).default("./data")),
  VIGIL_SECRET: z.preprocess(
    emptyToUndefined,
    z.string().min(32, "must be at least 32 characters (try: openssl rand -base64 48)").optional(),
  ),
  VIGIL_PREVIOUS_SECRETS: z.preprocess(emptyToUndefined, z.string().optional()),
  SMTP_URL: url(["smtp:", "smtps:"], "smtp://user:pass@mail.example.com:587"),
  MAIL_FROM: z.preprocess(emptyToUndefined, z.string().min(3).default("Vigil <vigil@localhost>")),
  WORKFLOW_B_API_TEMPLATE: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .refine(
        (v) => v.includes("{region}") || /^https?:\/\//.test(v),
        "must be an http(s) URL template, e.g. https://{region}.make.com/api/v2",
      )
      .default("https://{region}.make.com/api/v2"),
  ),
  PROBE_LEASE_SECONDS: intVar(1, 3600, 30),
  PROBE_CONCURRENCY: intVar(1, 10_000, 200),
  PROBE_TIMEOUT_MS: intVar(100, 120_000, 10_000),
  PROBE_DENY_PRIVATE: boolVar(false),
  INGEST_MAX_BACKLOG_ROWS: intVar(100, 10_000_000, 50_000),
  ALERT_FAILURE_MAIL_INTERVAL_SECONDS: intVar(0, 86_400, 900),
  ANOMALY_INTERVAL_SECONDS: intVar(10, 3600, 60),
  ANOMALY_WINDOW_MINUTES: intVar(5, 120, 15),
  ANOMALY_SHORT_WINDOW_MINUTES: intVar(5, 60, 5),
  ANOMALY_WINDOWS: intVar(2, 120, 6),
  ANOMALY_CATCH_UP_HOURS: intVar(0, 24, 24),
  ANOMALY_THRESHOLD: z.preprocess(
    emptyToUndefined,
    z.coerce
      .number({ error: "must be a number" })
      .min(1, "must be at least 1")
      .max(20, "must be at most 20")
      .default(3.5),
  ),
  ANOMALY_MIN_BASELINE_DAYS: intVar(3, 7, 5),
  WEBHOOK_ALLOW_HTTP_LOOPBACK: boolVar(false),
  CORS_ORIGINS: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .refine(
        (v) =>
          v.trim() === "*" ||
          v.split(",").every((o) => {
            try {
              const u = new URL(o.trim());
              return (u.protocol === "https:" || u.protocol === "http:") && u.origin === o.trim();
            } catch {
              return false;
            }
          }),
        "must be * or a comma-separated list of origins, e.g. https://app.example.com,http://localhost:3000",
      )
      .optional(),
  ),
  STATUS_PAGE_DOMAINS: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .refine(
        (v) =>
          v
            .split(",")
            .every((d) =>
              /^\.?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(d.trim()),
            ),
        "must be a comma-separated list of host names (status.example.com) or suffixes (.example.com)",
      )
      .optional(),
  ),
  METRICS_PORT: z.preprocess(
    emptyToUndefined,
    z.coerce
      .number({ error: "must be a port number" })
      .int("must be a whole number")
      .min(0, "must be between 0 and 65535 (0: any free port)")
      .max(65535, "must be between 0 and 65535 (0: any free port)")
      .optional(),
  ),
  METRICS_HOST: z.preprocess(emptyToUndefined, z.string().min(1).default("127.0.0.1")),
  METRICS_TOKEN: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .min(16, "must be at least 16 characters (try: openssl rand -hex 24)")
      .refine(
        (v) => /^[\x21-\x7e]+$/.test(v),
        "must be printable ASCII without spaces (it travels in a header)",
      )
      .optional(),
  ),
  LOG_LEVEL: z.preprocess(
    emptyToUndefined,
    z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  ),
});

export type Env = z.infer<typeof envSchema>;

export interface Config {
  databaseUrl: string | undefined;
  questdb: { httpUrl: string; pgUrl: string } | undefined;
  host: string;
  port: number;
  publicUrl: string;
  dataDir: string;
  /** Explicit master secret; when absent one is generated into the data dir (see secrets.ts). */
  secret: string | undefined;
  /** Earlier master secrets, still accepted for decrypting credentials during a rotation. */
  previousSecrets: string[];
  smtpUrl: string | undefined;
  mailFrom: string;
  logLevel: Env["LOG_LEVEL"];
  /** workflow_b API address; `{region}` is replaced by the connection's region. */
  workflowBApiTemplate: string;
  probe: { leaseSeconds: number; concurrency: number; timeoutMs: number };
  /**
   * Heartbeats and usage entries are refused with a 503 (nothing stored) while this many series
   * rows wait for the series store, so a stalled or overrun store sheds load instead of queueing
   * without bound.
   */
  ingest: { maxBacklogRows: number };
  /**
   * Noise control: at most one failure e-mail per connection every `failureMailIntervalSeconds`
   * (0: no limit); one decided sooner waits for the interval's end (docs/operations.md: Incidents: lifecycle and timeline).
   */
  alerts: { failureMailIntervalSeconds: number };
  /**
   * The anomaly detector (docs/operations.md: Anomaly detection): how often it runs, the long and
   * short windows (minutes), how many consecutive one-minute evaluations open or resolve an
   * anomaly, the robust score past which a window is outside its band, how many of the 7 baseline
   * days need data, and how far back a run catches up.
   */
  anomalies: {
    intervalSeconds: number;
    windowMinutes: number;
    shortWindowMinutes: number;
    windows: number;
    threshold: number;
    minBaselineDays: number;
    catchUpHours: number;
  };
  /**
   * Outbound webhooks (docs/webhooks.md): their URLs are https only, except plain http to a
   * loopback host (127.0.0.0/8, ::1, localhost) when `allowHttpLoopback`, for tests and local use.
   */
  webhooks: { allowHttpLoopback: boolean };
  /**
   * Outbound safety (src/lib/outbound.ts), PROBE_DENY_PRIVATE: when `denyPrivate`, probes, platform
   * syncs and webhooks refuse every non-public address (loopback, private, carrier-grade NAT,
   * link-local, metadata, unspecified, multicast, reserved), checked at connect time against every
   * DNS answer, and a workflow_a `base_url` in those ranges is a 400 at create/update. Off (the
   * default, for self-hosted use): probes go anywhere; webhooks still never go to link-local or
   * metadata addresses.
   */
  outbound: { denyPrivate: boolean };
  /**
   * Origins a browser may call the API from (CORS): `*`, a list, or null (CORS off, the default:
   * browsers then refuse cross-origin calls).
   */
  corsOrigins: "*" | string[] | null;
  /**
   * Vigil's own Prometheus metrics (docs/operations.md: Watching Vigil itself): a listener of its
   * own at `host:port` (METRICS_PORT; none when unset), and/or `GET /metrics` on the API port
   * with `Authorization: Bearer <token>` (METRICS_TOKEN; the admin listener asks for it too when set).
   */
  metrics: { port: number | undefined; host: string; token: string | undefined };
  /**
   * The custom domains status pages may claim (STATUS_PAGE_DOMAINS): host names and `.suffix`es,
   * lower case; null: any host name that is not an IP address nor Vigil's own.
   */
  statusPageDomains: string[] | null;
}

export class ConfigError extends Error {
  constructor(readonly problems: { variable: string; message: string }[]) {
    super(
      `Invalid configuration:\n${problems.map((p) => `  ${p.variable}: ${p.message}`).join("\n")}\n` +
        "Fix the variable(s) above (see .env.example) and start again.",
    );
    this.name = "ConfigError";
  }
}

/** Derives QuestDB's pg-wire address from its HTTP address: same host, port 8812, admin/quest. */
export function derivedQuestdbPgUrl(httpUrl: string): string {
  const u = new URL(httpUrl);
  return `postgres://admin:quest@${u.hostname}:8812/qdb`;
}

/** The detector's windows must fit together (docs/configuration.md). */
function anomalySettingsProblems(e: Env): { variable: string; message: string }[] {
  const out: { variable: string; message: string }[] = [];
  const long = e.ANOMALY_WINDOW_MINUTES;
  const short = e.ANOMALY_SHORT_WINDOW_MINUTES;
  if (long % 5 !== 0)
    out.push({
      variable: "ANOMALY_WINDOW_MINUTES",
      message: `must be a multiple of 5 (baselines come in 5-minute buckets), got ${long}`,
    });
  if (short % 5 !== 0)
    out.push({
      variable: "ANOMALY_SHORT_WINDOW_MINUTES",
      message: `must be a multiple of 5 (baselines come in 5-minute buckets), got ${short}`,
    });
  if (short > long)
    out.push({
      variable: "ANOMALY_SHORT_WINDOW_MINUTES",
      message: `must be at most ANOMALY_WINDOW_MINUTES (${long}), got ${short}`,
    });
  if (e.ANOMALY_WINDOWS <= short)
    out.push({
      variable: "ANOMALY_WINDOWS",
      message: `must be more than ANOMALY_SHORT_WINDOW_MINUTES (${short}), or a single bad minute could open an anomaly; got ${e.ANOMALY_WINDOWS}`,
    });
  return out;
}

/** Variables that were renamed: refused with what to set instead, so a setting is never silently ignored. */
const RENAMED: Record<string, string> = {
  ANOMALY_MIN_BASELINE_HOURS:
    "was renamed ANOMALY_MIN_BASELINE_DAYS (the baseline is now the same window on each of the 7 previous days); set that instead",
};

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const renamed = Object.keys(RENAMED).filter((k) => emptyToUndefined(env[k]) !== undefined);
  if (renamed.length > 0)
    throw new ConfigError(renamed.map((variable) => ({ variable, message: RENAMED[variable] as string })));
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => ({ variable: String(i.path[0] ?? "?"), message: i.message })),
    );
  }
  const e = parsed.data;
  const anomalyProblems = anomalySettingsProblems(e);
  if (anomalyProblems.length > 0) throw new ConfigError(anomalyProblems);
  if (e.QUESTDB_PG_URL && !e.QUESTDB_URL) {
    throw new ConfigError([
      { variable: "QUESTDB_PG_URL", message: "is set but QUESTDB_URL is not; set both, or neither" },
    ]);
  }
  const host = e.HOST;
  const publicHost = host.includes(":") ? `[${host}]` : host;
  return {
    databaseUrl: e.DATABASE_URL,
    questdb: e.QUESTDB_URL
      ? {
          httpUrl: e.QUESTDB_URL.replace(/\/+$/, ""),
          pgUrl: e.QUESTDB_PG_URL ?? derivedQuestdbPgUrl(e.QUESTDB_URL),
        }
      : undefined,
    host,
    port: e.PORT,
    publicUrl: (e.PUBLIC_URL ?? `http://${publicHost}:${e.PORT}`).replace(/\/+$/, ""),
    dataDir: path.resolve(e.VIGIL_DATA_DIR),
    secret: e.VIGIL_SECRET,
    previousSecrets: (e.VIGIL_PREVIOUS_SECRETS ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    smtpUrl: e.SMTP_URL,
    mailFrom: e.MAIL_FROM,
    logLevel: e.LOG_LEVEL,
    workflowBApiTemplate: e.WORKFLOW_B_API_TEMPLATE,
    probe: {
      leaseSeconds: e.PROBE_LEASE_SECONDS,
      concurrency: e.PROBE_CONCURRENCY,
      timeoutMs: e.PROBE_TIMEOUT_MS,
    },
    ingest: { maxBacklogRows: e.INGEST_MAX_BACKLOG_ROWS },
    alerts: { failureMailIntervalSeconds: e.ALERT_FAILURE_MAIL_INTERVAL_SECONDS },
    anomalies: {
      intervalSeconds: e.ANOMALY_INTERVAL_SECONDS,
      windowMinutes: e.ANOMALY_WINDOW_MINUTES,
      shortWindowMinutes: e.ANOMALY_SHORT_WINDOW_MINUTES,
      windows: e.ANOMALY_WINDOWS,
      threshold: e.ANOMALY_THRESHOLD,
      minBaselineDays: e.ANOMALY_MIN_BASELINE_DAYS,
      catchUpHours: e.ANOMALY_CATCH_UP_HOURS,
    },
    webhooks: { allowHttpLoopback: e.WEBHOOK_ALLOW_HTTP_LOOPBACK },
    outbound: { denyPrivate: e.PROBE_DENY_PRIVATE },
    corsOrigins: e.CORS_ORIGINS
      ? e.CORS_ORIGINS.trim() === "*"
        ? "*"
        : e.CORS_ORIGINS.split(",").map((o) => o.trim())
      : null,
    metrics: { port: e.METRICS_PORT, host: e.METRICS_HOST, token: e.METRICS_TOKEN },
    statusPageDomains: e.STATUS_PAGE_DOMAINS
      ? e.STATUS_PAGE_DOMAINS.split(",").map((d) => d.trim().toLowerCase())
      : null,
  };
}
