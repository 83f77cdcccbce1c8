import { pino } from "pino";

/**
 * Credentials never reach the log: request headers that carry keys and any body field that
 * holds a secret are censored wherever they appear in a logged object.
 */
export const redactPaths = [
  "req.headers.authorization",
  'req.headers["x-n8n-api-key"]',
  "headers.authorization",
  "*.api_key",
  "*.api_token",
  "*.password",
  "*.key",
  "*.secret",
  "api_key",
  "api_token",
  "password",
];

/**
 * A URL as the log may show it: an invitation link's token (`/invitations/<token>`, also inside a
 * `return_to` parameter) is a credential and is replaced by `[redacted]`.
 */
export function logUrl(url: string): string {
  return url
    .replace(/(\/invitations\/)[^/?#&]+/g, "$1[redacted]")
    .replace(/(%2Finvitations%2F)[^&#]+/gi, "$1[redacted]");
}

/** Fastify's request serializer (fastify/lib/logger-pino.js), with the URL through `logUrl`. */
const requestSerializer = (req: {
  method?: string;
  url?: string;
  headers?: Record<string, unknown>;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}) => ({
  method: req.method,
  url: typeof req.url === "string" ? logUrl(req.url) : req.url,
  version: req.headers?.["accept-version"],
  host: req.host,
  remoteAddress: req.ip,
  remotePort: req.socket?.remotePort,
});

export function createLogger(level: string, destination?: NodeJS.WritableStream) {
  return pino(
    {
      level,
      redact: { paths: redactPaths, censor: "[redacted]" },
      serializers: { req: requestSerializer },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination as pino.DestinationStream | undefined,
  );
}

type Level = "fatal" | "error" | "warn" | "info" | "debug" | "trace";
type Log = (...args: unknown[]) => void;

/**
 * A request's logger that becomes a real pino child only when it logs at an enabled level.
 * Fastify makes a child logger for every request; binding the request id (and pino's
 * redaction setup) costs a few microseconds that every heartbeat paid, although at the usual
 * levels almost no request logs anything. Used as Fastify's `childLoggerFactory`.
 */
export class LazyChildLogger {
  private real?: pino.Logger;

  constructor(
    private readonly parent: pino.Logger,
    private readonly bindings: pino.Bindings,
    private readonly opts: pino.ChildLoggerOptions,
  ) {}

  private get logger(): pino.Logger {
    return (this.real ??= this.parent.child(this.bindings, this.opts));
  }

  get level(): string {
    return this.real?.level ?? this.opts.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  isLevelEnabled(level: string): boolean {
    if (this.real) return this.real.isLevelEnabled(level);
    const values = this.parent.levels.values;
    return (values[level] ?? Infinity) >= (values[this.level] ?? 0);
  }

  private log(level: Level, args: unknown[]): void {
    if (this.isLevelEnabled(level)) (this.logger[level] as Log).apply(this.logger, args);
  }

  fatal(...args: unknown[]): void {
    this.log("fatal", args);
  }
  error(...args: unknown[]): void {
    this.log("error", args);
  }
  warn(...args: unknown[]): void {
    this.log("warn", args);
  }
  info(...args: unknown[]): void {
    this.log("info", args);
  }
  debug(...args: unknown[]): void {
    this.log("debug", args);
  }
  trace(...args: unknown[]): void {
    this.log("trace", args);
  }
  silent(): void {}

  child(bindings: pino.Bindings, opts?: pino.ChildLoggerOptions): pino.Logger {
    return this.logger.child(bindings, opts);
  }
}
