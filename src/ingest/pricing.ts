import type { RelationalStore } from "../stores/relational/types.js";
import { perApp } from "../core/context.js";
import { selectPrices } from "./repository.js";

export interface Price {
  model: string;
  effectiveFrom: Date;
  inputPerMtok: number;
  outputPerMtok: number;
  cacheReadPerMtok: number;
  cacheWritePerMtok: number;
}

/** Vendor prefixes and date suffixes a daemon may put around a model name. */
function candidates(model: string): string[] {
  const name = model.trim().toLowerCase();
  const bare = name.includes("/") ? name.slice(name.lastIndexOf("/") + 1) : name;
  const undated = bare.replace(/-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$/, "");
  return [...new Set([name, bare, undated])];
}

/**
 * The pricing table, held in memory and reloaded every few minutes. `priceOf` finds the row for
 * a model (exact name, then without a vendor prefix or date suffix, then the longest known
 * name the model starts with, so `gpt-4o-2024-08-06` prices as `gpt-4o`) in force at a time.
 */
export class PriceBook {
  private byModel = new Map<string, Price[]>();
  /** Model name as sent -> the price rows it resolves to (or none); rebuilt with each reload. */
  private resolved = new Map<string, Price[] | null>();
  private loadedAt = 0;
  private loading?: Promise<void>;

  constructor(
    private readonly db: () => RelationalStore,
    private readonly ttlMs = 5 * 60_000,
  ) {}

  private async refresh(): Promise<void> {
    if (Date.now() - this.loadedAt < this.ttlMs) return;
    this.loading ??= (async () => {
      const rows = await selectPrices(this.db());
      const next = new Map<string, Price[]>();
      for (const row of rows) {
        const list = next.get(row.model.toLowerCase()) ?? [];
        list.push({
          model: row.model,
          effectiveFrom: new Date(row.effective_from),
          inputPerMtok: Number(row.input_per_mtok),
          outputPerMtok: Number(row.output_per_mtok),
          cacheReadPerMtok: Number(row.cache_read_per_mtok),
          cacheWritePerMtok: Number(row.cache_write_per_mtok),
        });
        next.set(row.model.toLowerCase(), list);
      }
      this.byModel = next;
      this.resolved = new Map();
      this.loadedAt = Date.now();
    })().finally(() => {
      this.loading = undefined;
    });
    await this.loading;
  }

  async priceOf(model: string, at: Date): Promise<Price | null> {
    if (Date.now() - this.loadedAt >= this.ttlMs) await this.refresh();
    return this.lookup(model, at);
  }

  /**
   * The price as `priceOf` gives it, without waiting, while the loaded table is fresh; undefined
   * when it must be loaded first (then call `priceOf`). Heartbeats price every model they carry:
   * this spares them a promise per model.
   */
  priceNow(model: string, at: Date): Price | null | undefined {
    return Date.now() - this.loadedAt < this.ttlMs ? this.lookup(model, at) : undefined;
  }

  private lookup(model: string, at: Date): Price | null {
    let list = this.resolved.get(model);
    if (list === undefined) {
      list = this.resolve(model);
      if (this.resolved.size > 10_000) this.resolved.clear();
      this.resolved.set(model, list);
    }
    if (!list) return null;
    for (const p of list) if (p.effectiveFrom <= at) return p;
    return null;
  }

  private resolve(model: string): Price[] | null {
    const names = candidates(model);
    for (const c of names) {
      const hit = this.byModel.get(c);
      if (hit) return hit;
    }
    const name = names.at(-1) ?? "";
    let best: string | undefined;
    for (const known of this.byModel.keys()) {
      if (name.startsWith(`${known}-`) && (!best || known.length > best.length)) best = known;
    }
    return best ? (this.byModel.get(best) ?? null) : null;
  }

  /** Forget the loaded table (after an update in this process). */
  invalidate(): void {
    this.loadedAt = 0;
  }
}

export function costUsd(
  p: Price,
  t: { input: number; output: number; cacheRead?: number; cacheWrite?: number },
): number {
  return (
    (t.input * p.inputPerMtok +
      t.output * p.outputPerMtok +
      (t.cacheRead ?? 0) * p.cacheReadPerMtok +
      (t.cacheWrite ?? 0) * p.cacheWritePerMtok) /
    1_000_000
  );
}

/** This app's pricing table cache. */
export const priceBook = perApp((ctx) => new PriceBook(() => ctx.stores.db));
