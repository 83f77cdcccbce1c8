import { z } from "zod";
import { invalidInput } from "../core/errors.js";

/** The objectives accepted: 90 % to 99.999 % of checks succeeding. */
export const MIN_OBJECTIVE = 0.9;
export const MAX_OBJECTIVE = 0.99999;
/** The windows accepted, in whole UTC days (the SRE workbook's 28 and 30, and a quarter). */
export const WINDOW_DAYS = [28, 30, 90] as const;

const SEND = `send {"objective": <${MIN_OBJECTIVE} to ${MAX_OBJECTIVE}, e.g. 0.999>, "window_days": <${WINDOW_DAYS.join(", ")}>}`;

/** The body of PUT /v1/connections/{id}/slo, as the OpenAPI document describes it; `validateSloBody` parses it. */
export const sloBody = z.strictObject({
  objective: z
    .number()
    .min(MIN_OBJECTIVE)
    .max(MAX_OBJECTIVE)
    .describe(`the share of checks that must succeed, ${MIN_OBJECTIVE} to ${MAX_OBJECTIVE} (0.999: 99.9 %)`),
  window_days: z
    .number()
    .int()
    .describe(`the rolling window in whole UTC days, today included: ${WINDOW_DAYS.join(", ")}`),
});

export type SloBody = z.output<typeof sloBody>;

/**
 * Parses the body of PUT …/slo. Every problem is a 400 naming the field and saying what to send:
 * an objective of 1 (no failure allowed: no budget to burn), 0, above 1, a percentage (99.9), a
 * string; a window other than 28, 30 or 90 days; an unknown or missing field.
 */
export function validateSloBody(raw: unknown): SloBody {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw invalidInput("body", `must be a JSON object: ${SEND}`);
  const body = raw as Record<string, unknown>;
  const unknown = Object.keys(body).find((k) => k !== "objective" && k !== "window_days");
  if (unknown !== undefined) throw invalidInput(`body.${unknown}`, `is not a known field: ${SEND}`);
  for (const f of ["objective", "window_days"])
    if (!(f in body)) throw invalidInput(`body.${f}`, `is required: ${SEND}`);
  const o = body.objective;
  if (typeof o !== "number" || !Number.isFinite(o))
    throw invalidInput(
      "body.objective",
      `must be a number, not ${typeof o === "string" ? "a string" : JSON.stringify(o)}: ${SEND}`,
    );
  if (o > 1 && o <= 100)
    throw invalidInput(
      "body.objective",
      `must be a fraction, not a percentage: ${o} % is ${Number((o / 100).toPrecision(6))}`,
      { min: MIN_OBJECTIVE, max: MAX_OBJECTIVE },
    );
  if (o === 1)
    throw invalidInput(
      "body.objective",
      `must be below 1: an objective of 100 % allows no failed check, so there is no error budget to watch (at most ${MAX_OBJECTIVE})`,
      { min: MIN_OBJECTIVE, max: MAX_OBJECTIVE },
    );
  if (o < MIN_OBJECTIVE || o > MAX_OBJECTIVE)
    throw invalidInput("body.objective", `must be between ${MIN_OBJECTIVE} and ${MAX_OBJECTIVE}, got ${o}`, {
      min: MIN_OBJECTIVE,
      max: MAX_OBJECTIVE,
    });
  const d = body.window_days;
  if (typeof d !== "number" || !(WINDOW_DAYS as readonly number[]).includes(d))
    throw invalidInput(
      "body.window_days",
      `must be one of ${WINDOW_DAYS.join(", ")} (days), got ${JSON.stringify(d)}`,
      {
        allowed: [...WINDOW_DAYS],
      },
    );
  return { objective: o, window_days: d };
}
