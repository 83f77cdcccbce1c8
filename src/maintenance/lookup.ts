import type { AppContext } from "../core/context.js";
import { inSpans, maintenanceSpans } from "./repository.js";
import type { Span } from "./schedule.js";

/**
 * Maintenance stretches for the samples writer, which flags every sample a window covers. A probe
 * check or a heartbeat must not cost a query each: each process keeps a snapshot of every
 * connection's stretches from a day back to {@link AHEAD_MS} ahead, loaded in one query and
 * renewed every {@link TTL_MS} (with no window anywhere, an empty map). A sample outside the
 * snapshot's span (gap-fill over a day late) is looked up with its batch, in one query. Creating
 * or deleting a window drops this process's snapshot at once (`forgetMaintenance`); another node
 * of a fleet sees the change within TTL_MS. Opening an incident does not use the snapshot: it asks
 * the database (`underMaintenance`).
 */

const TTL_MS = 10_000;
const BEHIND_MS = 25 * 3_600_000;
const AHEAD_MS = 10 * 60_000;

interface Snapshot {
  from: number;
  to: number;
  expires: number;
  spans: Map<string, Span[]>;
}

interface State {
  current: Snapshot | null;
  loading: Promise<Snapshot> | null;
  /** Bumped by `forgetMaintenance`: a load started before it is not kept. */
  generation: number;
}

const states = new WeakMap<AppContext, State>();

const stateOf = (ctx: AppContext): State => {
  let s = states.get(ctx);
  if (!s) {
    s = { current: null, loading: null, generation: 0 };
    states.set(ctx, s);
  }
  return s;
};

/** Forgets this process's snapshot: a window was created or deleted. */
export function forgetMaintenance(ctx: AppContext): void {
  const s = stateOf(ctx);
  s.current = null;
  s.loading = null;
  s.generation++;
}

/** The snapshot, loaded (once for concurrent callers) when missing or stale. */
function snapshot(ctx: AppContext, now: number): Promise<Snapshot> {
  const s = stateOf(ctx);
  if (s.current && s.current.expires > now) return Promise.resolve(s.current);
  if (s.loading) return s.loading;
  const generation = s.generation;
  const from = now - BEHIND_MS;
  const to = now + AHEAD_MS;
  const loading = maintenanceSpans(ctx.stores.db, null, new Date(from), new Date(to)).then(
    (spans) => {
      const snap = { from, to, expires: now + TTL_MS, spans };
      if (s.generation === generation) {
        s.current = snap;
        s.loading = null;
      }
      return snap;
    },
    (err: unknown) => {
      if (s.generation === generation) s.loading = null;
      throw err;
    },
  );
  s.loading = loading;
  return loading;
}

/**
 * The rows with `maintenance` set: true for a row whose time a maintenance window covered for its
 * connection, false otherwise.
 */
export async function withMaintenanceFlags<
  R extends { ts: Date; connection_id: string; maintenance?: boolean | null },
>(ctx: AppContext, rows: readonly R[]): Promise<R[]> {
  if (rows.length === 0) return [];
  const snap = await snapshot(ctx, ctx.now().getTime());
  const outside = rows.filter((r) => r.ts.getTime() < snap.from || r.ts.getTime() >= snap.to);
  let more: Map<string, Span[]> | null = null;
  if (outside.length > 0) {
    const times = outside.map((r) => r.ts.getTime());
    more = await maintenanceSpans(
      ctx.stores.db,
      outside.map((r) => r.connection_id),
      new Date(Math.min(...times)),
      new Date(Math.max(...times) + 1),
    );
  }
  return rows.map((r) => {
    const t = r.ts.getTime();
    const spans = t >= snap.from && t < snap.to ? snap.spans : more;
    return { ...r, maintenance: inSpans(spans?.get(r.connection_id), r.ts) };
  });
}
