import { z } from "zod";
import { CONNECTION_STATUSES, SERVICE_TYPES } from "../../connections/schema.js";
import { anyJson, offsetPagination, oneOf, timestamp } from "./common.js";

const masked = z.string().nullable().describe("a run of asterisks when a credential is stored, else null");

/** The single-connection shape (spec: Connection). */
export const connection = z.object({
  id: z.string(),
  service_type: oneOf(SERVICE_TYPES),
  service_name: z.string(),
  status: oneOf(CONNECTION_STATUSES),
  base_url: z.string().nullable(),
  api_key: masked,
  organization_id: z.string().nullable(),
  created_at: timestamp,
});

const seconds = z.number().int().nullable().describe("null: the plan's default");

/** A connection in the list: every field, its organization and the credentials' lengths. */
export const listedConnection = connection.extend({
  api_token: masked,
  region: z.string().nullable(),
  team_id: z.string().nullable(),
  organizations: z.object({ id: z.string(), name: z.string() }).nullable(),
  configuration: anyJson,
  _credential_lengths: z.object({ api_key: z.number().int(), api_token: z.number().int() }),
  check_interval_seconds: seconds,
  failure_threshold: z.number().int().nullable(),
  heartbeat_interval_seconds: seconds,
  heartbeat_grace_seconds: seconds,
  last_sync_at: timestamp.nullable(),
});

export const connectionList = z.object({
  connections: z.array(listedConnection),
  pagination: offsetPagination,
});

export const connectionCreated = z.object({
  message: z.string(),
  connection: z.object({
    id: z.string(),
    service_type: oneOf(SERVICE_TYPES),
    service_name: z.string(),
    status: oneOf(CONNECTION_STATUSES),
  }),
  ingest_api_key: z
    .string()
    .nullable()
    .describe("gateway connections: the usage-ingestion key, shown this once; else null"),
});

export const connectionUpdated = z.object({ message: z.string(), connection });

export const connectionDeleted = z.object({ message: z.string() });
