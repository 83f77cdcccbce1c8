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
