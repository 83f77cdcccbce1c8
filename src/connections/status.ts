import { perApp } from "../core/context.js";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import { lockStatus, writeHeartbeatSeen, writeStatus } from "./repository.js";
import type { ConnectionStatus } from "./schema.js";

export type { ConnectionStatus };

/** What can move a connection's status. */
export type StatusEvent =
  /** An availability check succeeded (or a healthy heartbeat arrived). */
  | { type: "check_succeeded" }
  /** A check failed: `badCredentials` moves to error at once; otherwise a run of `failures` reaching `threshold` does. */
  | { type: "check_failed"; badCredentials: boolean; failures: number; threshold: number }
  | { type: "heartbeat_received" }
  | { type: "heartbeat_missed" }
  /** Its address or a credential changed: unconfirmed until the next check. */
  | { type: "reconfigured" };

/**
 * The connection status state machine (spec: States and transitions), as a pure function:
 * new connections start `inactive`; a success or a heartbeat makes them `active`; bad
 * credentials or a run of failed checks, or a missed heartbeat, make them `error`; a changed
 * address or credential makes them `inactive` until checked again.
 */
export function nextStatus(current: ConnectionStatus, event: StatusEvent): ConnectionStatus {
  switch (event.type) {
    case "check_succeeded":
    case "heartbeat_received":
      return "active";
    case "check_failed":
      return event.badCredentials || event.failures >= event.threshold ? "error" : current;
    case "heartbeat_missed":
      return "error";
    case "reconfigured":
      return "inactive";
  }
}

/**
 * Applies an event to one connection in the caller's transaction: the one writer of
 * `connections.status`. Returns the move, or null when the status stays (or the connection is gone).
 */
export async function recordStatus(
  tx: Queryable,
  connectionId: string,
  event: StatusEvent,
  at: Date,
): Promise<{ from: ConnectionStatus; to: ConnectionStatus } | null> {
  const from = await lockStatus(tx, connectionId);
  if (!from) return null;
  const to = nextStatus(from, event);
  if (to === from) return null;
  await writeStatus(tx, connectionId, to, at);
  return { from, to };
}
/**
 * A heartbeat arrived at `at`: records when the gateway was last heard from and applies the
 * `heartbeat_received` event. That event leads to the same status from every status (see
 * nextStatus), so one statement applies it without reading the current status first: ingest's
 * hot path stays one round trip. `updated_at` moves only when the status does.
 */
export async function recordHeartbeat(db: Queryable, connectionId: string, at: Date): Promise<void> {
  await writeHeartbeatSeen(db, connectionId, nextStatus("inactive", { type: "heartbeat_received" }), at);
}

/**
 * What ingest writes to a gateway connection: it is active, and when it was last heard from.
 * Heartbeats arrive far more often than that needs recording, so each node writes a
 * connection at most every `ttlMs` (15 s); the missed-heartbeat monitor allows for that.
 */
export class ConnectionStatusCache {
  private active = new Map<string, number>();

  constructor(
    private readonly db: () => RelationalStore,
    private readonly ttlMs = 15_000,
  ) {}

  async markActive(connectionId: string, at: Date): Promise<void> {
    const seen = this.active.get(connectionId);
    if (seen !== undefined && at.getTime() - seen < this.ttlMs) return;
    await recordHeartbeat(this.db(), connectionId, at);
    if (this.active.size > 100_000) this.active.clear();
    this.active.set(connectionId, at.getTime());
  }

  forget(connectionId: string): void {
    this.active.delete(connectionId);
  }
}

/** This app's record of gateways recently marked active. */
export const connectionStatusCache = perApp((ctx) => new ConnectionStatusCache(() => ctx.stores.db));
