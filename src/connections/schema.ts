import { z } from "zod";

/** Request schemas for the Connections API; route types and the OpenAPI description come from these. */

export const SERVICE_TYPES = ["workflow_a", "workflow_b", "gateway"] as const;
export type ServiceType = (typeof SERVICE_TYPES)[number];
export const CONNECTION_STATUSES = ["active", "inactive", "error"] as const;
/** The spec's connection statuses. */
export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];

const enumOf = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `must be one of ${values.join(", ")}` });

export const serviceType = enumOf(SERVICE_TYPES);
export const connectionStatus = enumOf(CONNECTION_STATUSES);
export const id = z.uuid({ error: "must be a connection or organization id (a UUID)" }).toLowerCase();

const httpUrl = z
  .string()
  .max(2048)
  .refine((v) => {
    try {
      return ["http:", "https:"].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, "must be an http or https URL");

const secret = z.string().min(1, "must not be empty").max(4096, "must be at most 4096 characters");
const name = z.string().trim().min(1, "must not be empty").max(200, "must be at most 200 characters");
const short = (max: number) =>
  z.string().trim().min(1, "must not be empty").max(max, `must be at most ${max} characters`);
const organization = z.union([z.literal("personal"), id], {
  error: "must be an organization id or `personal`",
});

/**
 * Any JSON value (a connection's `configuration`), as the one named schema `JsonValue` in the
 * OpenAPI document. Bodies are parsed JSON, so every value that reaches it is a JSON value; a
 * recursive schema would say the same, and generated clients cannot type the recursion
 * (openapi-typescript writes a type that refers to itself: TS2502).
 */
export const jsonValue = z.unknown().meta({
  id: "JsonValue",
  description: "Any JSON value: an object, array, string, number, boolean or null",
});

const seconds = (min: number, max: number) =>
  z
    .number({ error: "must be a number of seconds" })
    .int("must be a whole number")
    .min(min, `must be at least ${min}`)
    .max(max, `must be at most ${max}`);

/** Monitoring settings, on create and update; null on update returns to the plan's default. */
const monitoring = {
  check_interval_seconds: seconds(1, 86_400).optional(),
  failure_threshold: z
    .number({ error: "must be a number" })
    .int("must be a whole number")
    .min(1, "must be at least 1")
    .max(100, "must be at most 100")
    .optional(),
  heartbeat_interval_seconds: seconds(1, 86_400).optional(),
  heartbeat_grace_seconds: seconds(0, 86_400).optional(),
};
export const MONITORING_FIELDS = Object.keys(monitoring) as (keyof typeof monitoring)[];

export const createConnectionBody = z.strictObject({
  ...monitoring,
  service_type: serviceType,
  service_name: name,
  base_url: httpUrl.optional(),
  api_key: secret.optional(),
  api_token: secret.optional(),
  region: short(64).optional(),
  team_id: short(128).optional(),
  organization_id: organization.nullable().optional(),
  configuration: jsonValue.optional(),
});
export type CreateConnectionBody = z.infer<typeof createConnectionBody>;

export const updateConnectionBody = z.strictObject({
  check_interval_seconds: monitoring.check_interval_seconds.unwrap().nullable().optional(),
  failure_threshold: monitoring.failure_threshold.unwrap().nullable().optional(),
  heartbeat_interval_seconds: monitoring.heartbeat_interval_seconds.unwrap().nullable().optional(),
  heartbeat_grace_seconds: monitoring.heartbeat_grace_seconds.unwrap().nullable().optional(),
  service_name: name.optional(),
  base_url: httpUrl.optional(),
  api_key: secret.optional(),
  api_token: secret.optional(),
  region: short(64).nullable().optional(),
  team_id: short(128).nullable().optional(),
  organization_id: organization.nullable().optional(),
  configuration: jsonValue.nullable().optional(),
  service_type: z.never({ error: "cannot be changed; create a new connection instead" }).optional(),
});
export type UpdateConnectionBody = z.infer<typeof updateConnectionBody>;

const intParam = (name: string, min: number, max: number, dflt: number) =>
  z
    .string()
    .regex(/^-?\d+$/, `${name} must be a whole number`)
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .default(dflt as never);

export const listConnectionsQuery = z.strictObject({
  service_type: serviceType.optional(),
  status: connectionStatus.optional(),
  organization_id: organization.optional(),
  limit: intParam("limit", 1, 100, 50),
  offset: intParam("offset", 0, 1_000_000_000, 0),
});

export const connectionParams = z.strictObject({ id });

/** Which credential fields each kind uses; sending another kind's credential is a 400. */
export const KIND_FIELDS: Record<ServiceType, { required: string[]; allowed: string[] }> = {
  workflow_a: { required: ["base_url", "api_key"], allowed: ["base_url", "api_key"] },
  workflow_b: { required: ["api_token"], allowed: ["api_token", "region", "base_url"] },
  gateway: { required: [], allowed: ["base_url"] },
};
