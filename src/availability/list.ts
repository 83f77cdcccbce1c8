import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { equalities, visibleSeriesPage } from "../connections/scoped-page.js";
import { retainedScope } from "../retention/policy.js";
import { availabilitySamples, type RowOf } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";

/** One availability check (the spec's availability record), real or synthetic gap-fill. */
export interface AvailabilitySample {
  connection_id: string;
  checked_at: string;
  available: boolean;
  response_time_ms: number | null;
  status_code: number | null;
  reason: string | null;
  error: string | null;
  synthetic: boolean;
  source: string;
  /** Taken while a maintenance window covered the connection: left out of uptime (docs/maintenance.md). */
  maintenance: boolean;
}

export interface AvailabilityQuery extends PageRequest, Window {
  connectionId?: string;
  /** Only available (true) or unavailable (false) checks. */
  available?: boolean;
  /** Whether synthetic gap-fill samples are returned. */
  includeSynthetic: boolean;
}

export function toSample(r: RowOf<typeof availabilitySamples>): AvailabilitySample {
  return {
    connection_id: r.connection_id,
    checked_at: r.ts.toISOString(),
    available: r.available,
    response_time_ms: r.response_time_ms ?? null,
    status_code: r.status_code ?? null,
    reason: r.reason ?? null,
    error: r.error ?? null,
    synthetic: r.synthetic,
    source: r.source,
    maintenance: r.maintenance === true,
  };
}

/**
 * The series filters an availability query applies besides the connection scope. Exported
 * because the REST cursor binds itself to them (its fingerprint has always included them).
 */
export function availabilityFilters(q: Pick<AvailabilityQuery, "available" | "includeSynthetic">): Filter[] {
  return equalities({ available: q.available, synthetic: q.includeSynthetic ? undefined : false });
}

/** Availability samples of visible connections, newest first. */
export async function listAvailability(
  ctx: AppContext,
  actor: Actor,
  q: AvailabilityQuery,
): Promise<Page<AvailabilitySample>> {
  // never a sample older than the connection's plan keeps, even before the retention job ran
  const page = await visibleSeriesPage(ctx, actor, availabilitySamples, q, availabilityFilters(q), (scope) =>
    retainedScope(ctx.stores.db, scope, ctx.now()),
  );
  return { rows: page.rows.map(toSample), next: page.next };
}
