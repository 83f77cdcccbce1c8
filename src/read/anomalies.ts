import type { z } from "zod";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { relationalPage } from "./relational-page.js";
import type { anomaliesQuery } from "./schemas.js";

interface AnomalyRow extends Record<string, unknown> {
  id: string;
  connection_id: string;
  metric: string;
  status: string;
  detected_at: Date;
  resolved_at: Date | null;
  window_start: Date;
  window_end: Date;
  observed: number;
  baseline_mean: number;
  baseline_stddev: number;
  z_score: number;
}

/** Anomalies of visible connections, newest detection first. */
export async function listAnomalies(ctx: AppContext, p: Principal, q: z.output<typeof anomaliesQuery>) {
  const { rows, pagination } = await relationalPage<AnomalyRow>(
    ctx,
    p,
    { endpoint: "anomalies", table: "anomalies", timeColumn: "detected_at", filters: { status: q.status } },
    q,
  );
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return {
    data: rows.map((a) => ({
      id: a.id,
      connection_id: a.connection_id,
      metric: a.metric,
      status: a.status,
      detected_at: iso(a.detected_at),
      resolved_at: iso(a.resolved_at),
      window_start: iso(a.window_start),
      window_end: iso(a.window_end),
      observed: Number(a.observed),
      baseline_mean: Number(a.baseline_mean),
      baseline_stddev: Number(a.baseline_stddev),
      z_score: Number(a.z_score),
    })),
    pagination,
  };
}
