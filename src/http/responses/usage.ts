import { z } from "zod";
import { anyJson, offsetPagination, oneOf, timestamp } from "./common.js";

/** A stored usage entry. */
export const usageEntryOut = z.object({
  id: z.string(),
  connection_id: z.string(),
  entity: z.string(),
  usage_amount: z.number(),
  usage_entity: oneOf(["tokens", "custom"]),
  custom_name: z.string().nullable(),
  cost_cents: z.number(),
  workflow_id: z.string().nullable(),
  execution_id: z.string().nullable(),
  metadata: anyJson,
  created_at: timestamp,
});

export const usageRecorded = z.object({
  message: z.string(),
  count: z.number().int(),
  usage: z.array(usageEntryOut),
});

export const usageList = z.object({ usage_data: z.array(usageEntryOut), pagination: offsetPagination });

const cents = z.number().describe("US cents");

export const usageTotals = z.object({
  connection_id: z.string(),
  workflow_id: z.string().nullable(),
  execution_id: z.string().nullable(),
  start_date: timestamp.nullable(),
  end_date: timestamp.nullable(),
  totals: z.object({
    entries: z.number().int(),
    heartbeats: z.number().int(),
    tokens: z.number(),
    cost_cents: cents,
    cost_usd: z.number(),
  }),
  by_entity: z.array(
    z.object({ entity: z.string(), entries: z.number().int(), tokens: z.number(), cost_cents: cents }),
  ),
  by_unit: z.array(
    z.object({
      usage_entity: z.string(),
      custom_name: z.string().nullable(),
      entries: z.number().int(),
      amount: z.number(),
      cost_cents: cents,
    }),
  ),
  gateway: z
    .object({
      heartbeats: z.number().int(),
      input_tokens: z.number(),
      output_tokens: z.number(),
      cache_read_tokens: z.number(),
      cache_write_tokens: z.number(),
      requests: z.number(),
      cost_cents: cents,
      by_model: z.array(
        z.object({
          model: z.string(),
          input_tokens: z.number(),
          output_tokens: z.number(),
          cost_cents: cents,
          unpriced_tokens: z.number(),
        }),
      ),
    })
    .nullable()
    .describe("heartbeat totals; null when the range has none or a run is asked for"),
  unpriced_models: z.array(z.string()),
});

export const heartbeatRecorded = z.object({ message: z.string(), heartbeat_id: z.string() });
