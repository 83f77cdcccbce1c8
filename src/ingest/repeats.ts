import { hash } from "node:crypto";
import type { SeriesStore } from "../stores/series/types.js";
import { gatewayHeartbeats } from "../stores/series/tables.js";
import { perApp } from "../core/context.js";

/** How long after its first arrival a period-less heartbeat's resend is still a repeat. */
export const REPEAT_WINDOW_SECONDS = 60;

const idFor = (digest: string, second: number) =>
  `hb_${hash("sha256", `${digest}\n${second}`, "hex").slice(0, 32)}`;

/**
 * Where a heartbeat without a token period belongs. Such a heartbeat has no time of its own, so
 * a resend is recognised by its body: the same body from the same connection within
 * {@link REPEAT_WINDOW_SECONDS} of the first arrival is the same heartbeat (same id, same
 * timestamp, stored once); the same body later is a new heartbeat, since a health-only daemon
 * legitimately repeats itself.
 *
 * Resends to this process are found in memory (which also covers concurrent resends: the slot is
 * taken before any await). Resends after a restart or to another node are found in the series
 * store: the id is derived from the body digest and the arrival second, so the store is asked for
 * any of the window's candidate ids.
 */
export class PeriodlessRepeats {
  private readonly recent = new Map<string, { second: number; pending?: Promise<number> }>();
  private sweptAt = 0;

  constructor(private readonly series: () => SeriesStore) {}

  async place(connectionId: string, digest: string, received: Date): Promise<{ id: string; ts: Date }> {
    const now = Math.floor(received.getTime() / 1000);
    this.sweep(now);
    const key = `${connectionId}\n${digest}`;
    const known = this.recent.get(key);
    if (known && now - known.second <= REPEAT_WINDOW_SECONDS) {
      const second = known.pending ? await known.pending : known.second;
      return { id: idFor(digest, second), ts: new Date(second * 1000) };
    }
    const entry: { second: number; pending?: Promise<number> } = { second: now };
    entry.pending = this.lookup(connectionId, digest, now).then(
      (found) => {
        entry.second = found ?? now;
        entry.pending = undefined;
        return entry.second;
      },
      (err) => {
        this.recent.delete(key);
        throw err;
      },
    );
    this.recent.set(key, entry);
    const second = await entry.pending;
    return { id: idFor(digest, second), ts: new Date(second * 1000) };
  }

  private async lookup(connectionId: string, digest: string, now: number): Promise<number | null> {
    const candidates: string[] = [];
    for (let s = now - REPEAT_WINDOW_SECONDS; s <= now; s++) candidates.push(idFor(digest, s));
    const page = await this.series().page(gatewayHeartbeats, {
      where: [
        { column: "connection_id", op: "eq", value: connectionId },
        { column: "heartbeat_id", op: "in", value: candidates },
      ],
      since: new Date((now - REPEAT_WINDOW_SECONDS) * 1000),
      until: new Date((now + 1) * 1000),
      limit: 1,
    });
    const first = page.rows[0];
    return first ? Math.floor(first.ts.getTime() / 1000) : null;
  }

  private sweep(now: number) {
    if (now - this.sweptAt < REPEAT_WINDOW_SECONDS) return;
    this.sweptAt = now;
    for (const [k, v] of this.recent)
      if (!v.pending && now - v.second > REPEAT_WINDOW_SECONDS) this.recent.delete(k);
  }
}

/** This app's memory of recent period-less heartbeats. */
export const heartbeatRepeats = perApp((ctx) => new PeriodlessRepeats(() => ctx.stores.series));
