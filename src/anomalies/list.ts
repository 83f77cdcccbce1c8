import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { requireReadable } from "../connections/scope.js";
import { type AnomalyRecord, anomalyPage } from "./repository.js";

export type AnomalyStatus = "open" | "resolved";

/** One detected anomaly (the spec's anomaly record). */
export interface Anomaly {
  id: string;
  connection_id: string;
  metric: string;
  status: string;
  detected_at: string;
  resolved_at: string | null;
  window_start: string;
  window_end: string;
  observed: number;
  baseline_mean: number;
  baseline_stddev: number;
  z_score: number;
  /** Median and MAD of the baseline hours (same hour of day, previous 7 days). */
  baseline_median: number | null;
  baseline_mad: number | null;
  /** The band outside which a window is anomalous. */
  band_low: number | null;
  band_high: number | null;
  /** Start of the first anomalous window; end of the last one (null while open). */
  started_at: string | null;
  ended_at: string | null;
}

export interface AnomaliesQuery extends PageRequest, Window {
  connectionId?: string;
  status?: AnomalyStatus;
}

const iso = (d: Date) => new Date(d).toISOString();
const numOrNull = (v: number | string | null | undefined) =>
  v === null || v === undefined ? null : Number(v);

function toAnomaly(a: AnomalyRecord): Anomaly {
  return {
    id: a.id,
    connection_id: a.connection_id,
    metric: a.metric,
    status: a.status,
    detected_at: iso(a.detected_at),
    resolved_at: a.resolved_at ? iso(a.resolved_at) : null,
    window_start: iso(a.window_start),
    window_end: iso(a.window_end),
    observed: Number(a.observed),
    baseline_mean: Number(a.baseline_mean),
    baseline_stddev: Number(a.baseline_stddev),
    z_score: Number(a.z_score),
    baseline_median: numOrNull(a.baseline_median),
    baseline_mad: numOrNull(a.baseline_mad),
    band_low: numOrNull(a.band_low),
    band_high: numOrNull(a.band_high),
    started_at: a.started_at ? iso(a.started_at) : null,
    ended_at: a.ended_at ? iso(a.ended_at) : null,
  };
}

/** Anomalies of visible connections (or of one: 404 absent, 403 not visible), newest detection first. */
export async function listAnomalies(
  ctx: AppContext,
  actor: Actor,
  q: AnomaliesQuery,
): Promise<Page<Anomaly>> {
  if (q.connectionId) await requireReadable(ctx, actor, q.connectionId);
  const page = await anomalyPage(ctx.stores.db, actor, q);
  return { rows: page.rows.map(toAnomaly), next: page.next };
}
