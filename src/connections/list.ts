import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import {
  type ConnectionListFilter,
  type ListedConnection,
  listConnectionRows,
  toListedConnection,
} from "./repository.js";

export type { ConnectionListFilter };

/**
 * Connections the caller may see, newest first: one offset page of them (filtered by kind,
 * status, organization or `personal`) and how many match in all.
 */
export async function listConnections(
  ctx: AppContext,
  p: Actor,
  q: ConnectionListFilter,
): Promise<{ rows: ListedConnection[]; total: number }> {
  const { rows, total } = await listConnectionRows(ctx.stores.db, p, q);
  return { rows: rows.map(toListedConnection), total };
}
