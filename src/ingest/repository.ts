import type { Queryable } from "../stores/relational/types.js";

/** A row of the pricing table (sql/postgres/003_pricing.sql); prices per million tokens. */
export interface PriceRow extends Record<string, unknown> {
  model: string;
  effective_from: Date | string;
  input_per_mtok: number;
  output_per_mtok: number;
  cache_read_per_mtok: number;
  cache_write_per_mtok: number;
}

/** The whole pricing table, each model's rows newest first. */
export async function selectPrices(db: Queryable): Promise<PriceRow[]> {
  const r = await db.query<PriceRow>(
    `SELECT model, effective_from, input_per_mtok, output_per_mtok, cache_read_per_mtok, cache_write_per_mtok
       FROM model_prices ORDER BY model, effective_from DESC`,
  );
  return r.rows;
}
