import { z } from "zod";
import { isoTimestamp, LIMITS } from "../core/limits.js";

/**
 * The gateway heartbeat body (spec: Gateway heartbeat). Objects are loose: a newer daemon may
 * add fields, which are accepted and ignored. Counts are whole numbers >= 0, money and latency
 * finite numbers >= 0, times ISO 8601 with an offset.
 */
const count = z
  .number({ error: "must be a number" })
  .int("must be a whole number")
  .min(0, "must be 0 or more")
  .max(LIMITS.tokens, `must be at most ${LIMITS.tokens}`);
const nonNegative = z.number({ error: "must be a number" }).min(0, "must be 0 or more");
const money = nonNegative.max(LIMITS.costUsd, `must be at most ${LIMITS.costUsd} (US dollars)`);
const time = isoTimestamp("2026-01-05T10:00:00Z");

export const HEARTBEAT_BODY_LIMIT = 64 * 1024;

export const heartbeatBody = z.looseObject({
  type: z.literal("heartbeat", { error: 'must be "heartbeat"' }),
  gateway: z.looseObject({
    status: z.string({ error: "must be a string" }).min(1, "must not be empty").max(64),
    latencyMs: nonNegative.max(LIMITS.latencyMs, `must be at most ${LIMITS.latencyMs}`),
    version: z.string({ error: "must be a string" }).max(64),
  }),
  system: z
    .looseObject({ gatewayPidAlive: z.boolean({ error: "must be true or false" }).optional() })
    .optional(),
  tokens: z
    .looseObject({
      period: z
        .looseObject({
          inputTokens: count,
          outputTokens: count,
          cacheReadTokens: count.default(0),
          cacheWriteTokens: count.default(0),
          requestCount: count.default(0),
          estimatedCostUsd: money.optional(),
          startedAt: time,
          endedAt: time,
        })
        .refine((p) => Date.parse(p.endedAt) >= Date.parse(p.startedAt), {
          message: "must not be before startedAt",
          path: ["endedAt"],
        }),
      byModel: z
        .array(
          z.looseObject({
            model: z.string({ error: "must be a string" }).min(1, "must not be empty").max(200),
            inputTokens: count,
            outputTokens: count,
            estimatedCostUsd: money.optional(),
          }),
          { error: "must be an array" },
        )
        .max(500, "at most 500 models")
        .optional(),
    })
    .optional(),
});

export type HeartbeatBody = z.infer<typeof heartbeatBody>;

// ---------------------------------------------------------------------------------------------
// The fast path. Every gateway sends a heartbeat every few seconds, so a fleet's heartbeats are
// most of Vigil's requests, and nearly all of them are valid. `parseHeartbeat` checks a body by
// hand against the same rules as `heartbeatBody`, accepting only what the schema accepts; any
// body it does not accept at once (anything unusual, every invalid one) goes through the schema,
// which gives the exact answer and the same error messages as always. The output is the schema's:
// defaults filled in, known keys of `system` first (the stored JSON is the same either way).
// test/ingest/heartbeat-fast.test.ts compares the two on generated bodies.

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const isCount = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= LIMITS.tokens;
const isMoney = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= LIMITS.costUsd;
const countOr0 = (p: Obj, k: string) => {
  const v = p[k];
  if (v === undefined) return ((p[k] = 0), true);
  return isCount(v);
};
const firstKeyIs = (o: Obj, key: string): boolean => {
  for (const k in o) return k === key;
  return false;
};
/** Times are rare enough per body (two) to leave to the schema's own rule. */
const isTime = (v: unknown) => typeof v === "string" && time.safeParse(v).success;

function accepted(b: unknown): HeartbeatBody | null {
  if (!isObj(b) || b.type !== "heartbeat") return null;
  const g = b.gateway;
  if (!isObj(g)) return null;
  const { status, latencyMs, version } = g;
  if (typeof status !== "string" || status.length < 1 || status.length > 64) return null;
  if (typeof latencyMs !== "number" || !Number.isFinite(latencyMs) || latencyMs < 0) return null;
  if (latencyMs > LIMITS.latencyMs) return null;
  if (typeof version !== "string" || version.length > 64) return null;
  if (b.system !== undefined) {
    const s = b.system;
    if (!isObj(s)) return null;
    if (s.gatewayPidAlive !== undefined && typeof s.gatewayPidAlive !== "boolean") return null;
    // the schema's output order: its one known key first (rebuilt only when it is not already)
    if ("gatewayPidAlive" in s && !firstKeyIs(s, "gatewayPidAlive")) {
      const { gatewayPidAlive, ...rest } = s;
      b.system = { gatewayPidAlive, ...rest };
    }
  }
  if (b.tokens !== undefined) {
    const t = b.tokens;
    if (!isObj(t)) return null;
    {
      // a tokens object always has its period
      const p = t.period;
      if (!isObj(p) || !isCount(p.inputTokens) || !isCount(p.outputTokens)) return null;
      if (p.estimatedCostUsd !== undefined && !isMoney(p.estimatedCostUsd)) return null;
      if (!isTime(p.startedAt) || !isTime(p.endedAt)) return null;
      if (Date.parse(p.endedAt as string) < Date.parse(p.startedAt as string)) return null;
      // defaults last, on a body already known good (nothing is changed on the way to a 400)
      if (!countOr0(p, "cacheReadTokens") || !countOr0(p, "cacheWriteTokens") || !countOr0(p, "requestCount"))
        return null;
    }
    if (t.byModel !== undefined) {
      const ms = t.byModel;
      if (!Array.isArray(ms) || ms.length > 500) return null;
      for (const m of ms) {
        if (!isObj(m)) return null;
        if (typeof m.model !== "string" || m.model.length < 1 || m.model.length > 200) return null;
        if (!isCount(m.inputTokens) || !isCount(m.outputTokens)) return null;
        if (m.estimatedCostUsd !== undefined && !isMoney(m.estimatedCostUsd)) return null;
      }
    }
  }
  return b as HeartbeatBody;
}

/**
 * A heartbeat body, checked: the hand-written check for the common case, the schema (and its
 * 400 naming the field) for anything else. `schemaParse` is the route's schema parser.
 */
export function parseHeartbeat(raw: unknown, schemaParse: (raw: unknown) => HeartbeatBody): HeartbeatBody {
  return accepted(raw) ?? schemaParse(raw);
}
