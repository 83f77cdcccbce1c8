import type { Queryable } from "../stores/relational/types.js";

/** Statements of the dashboard's own (the rest goes through the features' core functions). */

export async function anyUserExists(db: Queryable): Promise<boolean> {
  const r = await db.query("SELECT 1 FROM users LIMIT 1");
  return r.rows.length > 0;
}
