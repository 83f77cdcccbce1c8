import { z } from "zod";
import { MAX_WINDOWS_PER_ACCOUNT } from "../../maintenance/windows.js";
import { timestamp } from "./common.js";

/** One maintenance window (docs/maintenance.md). */
export const maintenanceWindow = z.object({
  id: z.string(),
  organization_id: z
    .string()
    .nullable()
    .describe("the organization the window belongs to; null for a personal window"),
  covers: z
    .enum(["connections", "organization"])
    .describe("the listed connections, or every connection of its organization (those added later too)"),
  connection_ids: z
    .array(z.string())
    .nullable()
    .describe("the listed connections; null when it covers its organization"),
  starts_at: timestamp.describe("one-off: its start; recurring: its first occurrence's start"),
  ends_at: timestamp
    .nullable()
    .describe("one-off: its end; recurring: its last occurrence's end, null while its rule has no end"),
  rrule: z.string().nullable().describe("recurring: the RRULE, normalised; null for a one-off window"),
  duration_minutes: z.number().int().nullable().describe("recurring: each occurrence's length"),
  timezone: z.string().nullable().describe("recurring: the IANA time zone its rule is read in"),
  active: z.boolean().describe("true when it covers its connections now"),
  next: z
    .object({ starts_at: timestamp, ends_at: timestamp })
    .nullable()
    .describe("the occurrence under way or the next one; null when none is left"),
  created_at: timestamp,
});

export const maintenanceWindowList = z.object({
  maintenance_windows: z
    .array(maintenanceWindow)
    .describe(
      `the windows the key sees, oldest first: its personal ones and its organizations' (an account keeps at most ${MAX_WINDOWS_PER_ACCOUNT} that have not ended)`,
    ),
});

export const maintenanceWindowDeleted = z.object({ id: z.string(), deleted: z.literal(true) });
