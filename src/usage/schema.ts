import { z } from "zod";
import { isoTimestamp, LIMITS } from "../core/limits.js";

export const MAX_BATCH = 100;

const text = (max: number) =>
  z
    .string({ error: "must be a string" })
    .min(1, "must not be empty")
    .max(max, `must be at most ${max} characters`);
const nonNegative = z.number({ error: "must be a number" }).min(0, "must be 0 or more");
const isoDate = isoTimestamp();

export const usageEntry = z
  .strictObject({
    connection_id: z.uuid({ error: "must be a connection id (a UUID)" }).toLowerCase(),
    entity: text(200),
    usage_amount: nonNegative.max(LIMITS.usageAmount, `must be at most ${LIMITS.usageAmount}`),
    usage_entity: z.enum(["tokens", "custom"], { error: "must be tokens or custom" }).default("tokens"),
    custom_name: text(200).optional(),
    cost_cents: nonNegative.max(LIMITS.costCents, `must be at most ${LIMITS.costCents} (cents)`).default(0),
    workflow_id: text(200).optional(),
    execution_id: text(200).optional(),
    metadata: z.record(z.string(), z.unknown(), { error: "must be an object" }).optional(),
  })
  .superRefine((e, ctx) => {
    if (e.usage_entity === "custom" && !e.custom_name)
      ctx.addIssue({
        code: "custom",
        path: ["custom_name"],
        message: "is required when usage_entity is custom",
      });
  });
export type UsageEntryInput = z.output<typeof usageEntry>;

const intParam = (min: number, max: number, dflt: number) =>
  z
    .string()
    .regex(/^-?\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .default(dflt as never);

const dateRange = {
  start_date: isoDate.optional(),
  end_date: isoDate.optional(),
};
const checkRange = (q: { start_date?: string; end_date?: string }, ctx: z.RefinementCtx) => {
  if (q.start_date && q.end_date && Date.parse(q.start_date) > Date.parse(q.end_date))
    ctx.addIssue({ code: "custom", path: ["start_date"], message: "must not be after end_date" });
};

export const listUsageQuery = z
  .strictObject({
    connection_id: z.uuid({ error: "must be a connection id (a UUID)" }).toLowerCase().optional(),
    workflow_id: text(200).optional(),
    execution_id: text(200).optional(),
    entity: text(200).optional(),
    usage_entity: z.enum(["tokens", "custom"], { error: "must be tokens or custom" }).optional(),
    ...dateRange,
    limit: intParam(1, 100, 50),
    offset: intParam(0, 1_000_000_000, 0),
  })
  .superRefine(checkRange);

export const usageTotalsQuery = z
  .strictObject({
    connection_id: z.uuid({ error: "must be a connection id (a UUID)" }).toLowerCase(),
    workflow_id: text(200).optional(),
    execution_id: text(200).optional(),
    ...dateRange,
  })
  .superRefine(checkRange);
