import { z } from "zod";

const rate = z
  .number()
  .nullable()
  .describe("the window's failed share of checks ÷ (1 − objective); null when the window has no checks");

/** GET/PUT /v1/connections/{id}/slo: the SLO and its status; every field null when no SLO is set. */
export const sloStatus = z.object({
  connection_id: z.string(),
  objective: z.number().nullable().describe("the share of checks that must succeed; null: no SLO is set"),
  window_days: z.number().int().nullable().describe("the rolling window in whole UTC days, today included"),
  window_start: z
    .string()
    .nullable()
    .describe("where the window starts: 00:00 UTC, window_days − 1 days before today"),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
  sli: z
    .object({
      checks: z.number().int().describe("checks in the window (samples under maintenance left out)"),
      failed: z.number().int(),
      availability: z
        .number()
        .nullable()
        .describe("successful share of the window's checks; null without checks"),
    })
    .nullable(),
  error_budget: z
    .object({
      total: z.number().describe("1: the window's allowed failures, (1 − objective) of its checks"),
      consumed: z.number().describe("failed checks as a fraction of the allowed failures"),
      remaining: z.number().describe("1 − consumed; below 0 once the objective is missed"),
    })
    .nullable(),
  burn_rates: z
    .object({ "5m": rate, "30m": rate, "1h": rate, "6h": rate, "1d": rate, "3d": rate })
    .nullable()
    .describe("how fast the budget burns over each trailing window; 1 spends it exactly over the SLO window"),
});

export const sloRemoved = z.object({
  message: z.string(),
  connection_id: z.string(),
  removed: z.boolean().describe("false when the connection had no SLO (removing is still a success)"),
});
