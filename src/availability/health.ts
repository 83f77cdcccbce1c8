import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { invalidInput } from "../core/errors.js";
import { getConnection } from "../connections/get.js";
import { availabilitySamples } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { SAMPLE_MEASURES, toRollup } from "../retention/rollups.js";

const HOUR_MS = 3_600_000;

/** The window `connectionHealth` accepts, in hours (the spec's tool server bounds). */
export const HEALTH_HOURS = { min: 1, max: 48, default: 24 } as const;

/** The newest sample of the window. */
export interface HealthCheck {
  at: string;
  available: boolean;
  /** Milliseconds; null when the check measured none (synthetic gap-fill, a timeout). */
  responseTimeMs: number | null;
  /** A gap-fill sample recorded for a slot in which no check could run. */
  synthetic: boolean;
  /** `probe`, `heartbeat` or `gap_fill`. */
  source: string;
}

/** The newest unavailable sample of the window. */
export interface HealthFailure {
  at: string;
  /** What went wrong, as recorded (the error text, else the reason). */
  error: string;
  /** The machine-readable cause: timeout, http_status, bad_credentials, missed_heartbeat, … */
  reason: string | null;
  synthetic: boolean;
}

/** One connection's availability over the last `windowHours` hours. */
export interface ConnectionHealth {
  connection: { id: string; name: string; platform: string; status: string };
  windowHours: number;
  since: string;
  until: string;
  /** Samples in the window, synthetic gap-fill included (as /v1/availability/summary counts them). */
  totalChecks: number;
  availableChecks: number;
  /** Of `totalChecks`, how many are synthetic gap-fill. */
  syntheticChecks: number;
  /** Percent of checks available, to 3 decimals; null without checks. */
  uptimePercent: number | null;
  /** Mean of the recorded response times, to 1 decimal; null when none was recorded. */
  avgResponseTimeMs: number | null;
  latestCheck: HealthCheck | null;
  latestFailure: HealthFailure | null;
}

/**
 * Health of one connection over the last `hours` hours (1 to 48), up to now: 404 when it does
 * not exist, 403 when the caller may not see it. The figures are those of
 * `/v1/availability/summary` (same raw samples, same totals function, same rounding), so over
 * 24 hours they equal its `day` window: synthetic gap-fill samples count as checks (probe
 * gap-fill carries the last known state, missed-heartbeat gap-fill counts as unavailable) and
 * are reported in `syntheticChecks`; the latest check and failure may be synthetic and say so.
 * Raw samples are read directly: every plan keeps at least 7 days of them.
 */
export async function connectionHealth(
  ctx: AppContext,
  actor: Actor,
  q: { connectionId: string; hours?: number },
): Promise<ConnectionHealth> {
  const hours = q.hours ?? HEALTH_HOURS.default;
  if (!Number.isFinite(hours) || hours < HEALTH_HOURS.min || hours > HEALTH_HOURS.max)
    throw invalidInput("hours", `must be a number from ${HEALTH_HOURS.min} to ${HEALTH_HOURS.max}`);
  const connection = await getConnection(ctx, actor, q.connectionId);
  const until = ctx.now();
  const since = new Date(until.getTime() - hours * HOUR_MS);
  const scope: Filter = { column: "connection_id", op: "eq", value: connection.id };
  const series = ctx.stores.series;
  const window = { since, until };
  // One aggregate grouped by `synthetic` gives the totals and the gap-fill count together: three
  // statements to the series store, not four (npm run bench -- mcp).
  const [groups, latest, failure] = await Promise.all([
    series.aggregate(availabilitySamples, {
      bucket: "all",
      where: [scope],
      since,
      until,
      groupBy: ["connection_id", "synthetic"],
      measures: SAMPLE_MEASURES,
    }),
    series.page(availabilitySamples, { where: [scope], ...window, limit: 1 }),
    series.page(availabilitySamples, {
      where: [scope, { column: "available", op: "eq", value: false }],
      ...window,
      limit: 1,
    }),
  ]);
  let checks = 0;
  let up = 0;
  let rs = 0;
  let rn = 0;
  let synthetic = 0;
  for (const g of groups) {
    const p = toRollup({ ...g, bucket: since });
    checks += p.checks;
    up += p.available;
    rs += p.response_ms_sum;
    rn += p.response_ms_count;
    if (["true", "t", "1"].includes(String(g.synthetic))) synthetic += p.checks;
  }
  const last = latest.rows[0];
  const down = failure.rows[0];
  return {
    connection: {
      id: connection.id,
      name: connection.service_name,
      platform: connection.service_type,
      status: connection.status,
    },
    windowHours: hours,
    since: since.toISOString(),
    until: until.toISOString(),
    totalChecks: checks,
    availableChecks: up,
    syntheticChecks: synthetic,
    // the summary's rounding (availability/summary.ts)
    uptimePercent: checks ? Math.round((up / checks) * 100_000) / 1000 : null,
    avgResponseTimeMs: rn ? Math.round((rs / rn) * 10) / 10 : null,
    latestCheck: last
      ? {
          at: last.ts.toISOString(),
          available: last.available,
          responseTimeMs: last.response_time_ms ?? null,
          synthetic: last.synthetic,
          source: last.source,
        }
      : null,
    latestFailure: down
      ? {
          at: down.ts.toISOString(),
          error: down.error ?? down.reason ?? "unavailable",
          reason: down.reason ?? null,
          synthetic: down.synthetic,
        }
      : null,
  };
}
