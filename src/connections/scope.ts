import { forbidden, notFound } from "../core/errors.js";
import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { connectionAccess, visibleConnectionIdPage, visibleConnectionIds } from "../identity/visibility.js";
import type { Filter } from "../stores/series/types.js";

/**
 * A read naming one connection: 404 when it does not exist, 403 when the caller may not see it
 * (the read API's messages name the id; the Connections API has its own, see access.ts).
 */
export async function requireReadable(ctx: AppContext, p: Actor, connectionId: string): Promise<void> {
  const access = await connectionAccess(ctx.stores.db, p, connectionId);
  if (access === "absent") throw notFound(`Connection ${connectionId} not found`);
  if (access === "forbidden") throw forbidden(`No access to connection ${connectionId}`);
}

/**
 * The connection filter for a series read: the one connection asked for (404 when absent, 403
 * when not visible), or every connection the caller may see. Null means the caller sees none.
 *
 * This names every visible connection in the statement. Reads that return rows per connection
 * (the summary, analytics) walk the connections in pages instead (`connectionWalk`); the
 * newest-first lists across all connections (availability, executions, usage entries) still use
 * this one, see `connectionWalk` for why.
 */
export async function connectionScope(
  ctx: AppContext,
  p: Actor,
  connectionId?: string,
): Promise<Filter | null> {
  if (connectionId) {
    await requireReadable(ctx, p, connectionId);
    return { column: "connection_id", op: "eq", value: connectionId };
  }
  const ids = await visibleConnectionIds(ctx.stores.db, p);
  return ids.length ? { column: "connection_id", op: "in", value: ids } : null;
}

/** The connections a per-connection read walks, one page of ids at a time. */
export interface ConnectionWalk {
  /** Up to `limit` ids after `after` (exclusive; from the first when undefined), in the walk's order. */
  page(after: string | undefined, limit: number): Promise<string[]>;
}

/**
 * Big accounts (issue #17). Reads whose rows are per connection (the availability summary and
 * analytics, ordered by connection id) are driven by pages of the caller's visible connections:
 * PostgreSQL gives the next page of ids (keyset by id, byte order, `visibleConnectionIdPage`),
 * and the series statements name only that page, `connection_id IN (<page>)`: at most about the
 * page size of ids (a few hundred to two thousand), however many connections the account has,
 * and only the page's rows in memory.
 *
 * Why this design, measured for an organization of 10,000 connections (`npm run bench -- read
 * --connections 10000 --days 7`, 100.8 M samples, QuestDB 9.3.4, 2026-11-24):
 * - Tenant isolation stays in one place and exact: the ids come from PostgreSQL, under the one
 *   visibility rule, in the same request, so a connection moved out of an organization or
 *   deleted is in no page from that moment on. A mirror of owners in QuestDB would be a second
 *   copy of the rule's inputs, written by connection create/move/delete and membership changes
 *   on another store, that can lag or miss a write and then show one tenant's rows to another;
 *   and it did not pay: `connection_id IN (SELECT … FROM owners WHERE …)` over today's raw
 *   samples took as long as the same ids bound as a list (about 470 ms for 1,000 connections),
 *   as QuestDB still tests every row against the set.
 * - QuestDB tests a bound `IN` list row by row, so a statement's cost grows with the rows it
 *   scans times the ids it names: the whole account's 10,000 ids made the month summary and
 *   analytics take seconds; a page of 100 ids takes tens of milliseconds. Splitting a page into
 *   smaller statements did not help (4 × 250 ids cost what 1 × 1,000 did), so a page is one
 *   statement.
 * - Only the page's rows are computed and held, not the whole account's.
 * - The same code runs on both series backends: the pages come from PostgreSQL and the series
 *   statement is an ordinary filter, so QuestDB and `sql` give the same answers.
 * Today is read as the last rollup run's partial rows up to its watermark plus the raw samples
 * after it (availability/totals.ts), exact to the moment: a page of 1,000 connections' today in
 * ~10 ms instead of scanning the day's raw samples (~500 ms by midday at 10,000 connections, as
 * QuestDB tests every row against the page's ids).
 * Newest-first lists across all connections (`/v1/availability`, executions, usage entries) are
 * ordered by time, not by connection, so a page of connections cannot drive them; they still
 * name every visible connection (`connectionScope`).
 *
 * With `connectionId`, the walk is that one connection (404 absent, 403 not visible).
 */
export async function connectionWalk(
  ctx: AppContext,
  p: Actor,
  order: "asc" | "desc",
  connectionId?: string,
): Promise<ConnectionWalk> {
  if (connectionId) {
    await requireReadable(ctx, p, connectionId);
    return {
      page: async (after) =>
        after === undefined || (order === "asc" ? connectionId > after : connectionId < after)
          ? [connectionId]
          : [],
    };
  }
  return {
    page: (after, limit) =>
      visibleConnectionIdPage(ctx.stores.db, p, { ...(after !== undefined ? { after } : {}), order, limit }),
  };
}

/** The series filter naming these connections (one page of a walk). */
export function idScope(ids: readonly string[]): Filter {
  return ids.length === 1
    ? { column: "connection_id", op: "eq", value: ids[0] as string }
    : { column: "connection_id", op: "in", value: ids };
}
