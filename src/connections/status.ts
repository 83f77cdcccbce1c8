import type { RelationalStore } from "../stores/relational/types.js";

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

  async markActive(connectionId: string): Promise<void> {
    const seen = this.active.get(connectionId);
    if (seen !== undefined && Date.now() - seen < this.ttlMs) return;
    await this.db().query(
      `UPDATE connections SET last_heartbeat_at = now(),
              status = 'active', updated_at = CASE WHEN status <> 'active' THEN now() ELSE updated_at END
        WHERE id = $1`,
      [connectionId],
    );
    if (this.active.size > 100_000) this.active.clear();
    this.active.set(connectionId, Date.now());
  }

  forget(connectionId: string): void {
    this.active.delete(connectionId);
  }
}
