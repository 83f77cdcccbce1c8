import { z } from "zod";
import { isoTimestamp } from "../core/limits.js";

/** The read API's common parameters (spec: Limits). */
const isoTime = isoTimestamp();

export const commonReadParams = {
  limit: z
    .string()
    .regex(/^-?\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().min(1, "must be at least 1").max(1000, "must be at most 1000"))
    .default(100 as never),
  cursor: z.string().min(1).max(2048).optional(),
  since: isoTime.optional(),
  until: isoTime.optional(),
};

export const boolParam = z
  .enum(["true", "false"], { error: "must be true or false" })
  .transform((v) => v === "true");

export function checkWindow(q: { since?: string; until?: string }, ctx: z.RefinementCtx): void {
  if (q.since && q.until && Date.parse(q.since) > Date.parse(q.until))
    ctx.addIssue({ code: "custom", path: ["since"], message: "must not be after until" });
}
