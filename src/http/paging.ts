import type { AppContext } from "../core/context.js";
import type { Page, Position } from "../core/page.js";
import { cursorCodec } from "./cursor.js";

/** The read API's page body: rows, and the opaque cursor that continues them. */
export interface RestPage<R> {
  data: R[];
  pagination: { next_cursor: string | null; has_more: boolean; limit: number };
}

/** The position a REST cursor stands for; a forged, altered or foreign cursor is a 400 INVALID_CURSOR. */
export function decodeCursor(
  ctx: AppContext,
  cursor: string | undefined,
  fingerprint: string,
): Position | undefined {
  return cursor ? cursorCodec(ctx).decode(cursor, fingerprint) : undefined;
}

/** A query's page as the read API answers it; `has_more` also when an aggregate was cut at the limit. */
export function restPage<R>(ctx: AppContext, page: Page<R>, limit: number, fingerprint: string): RestPage<R> {
  return {
    data: page.rows,
    pagination: {
      next_cursor: page.next ? cursorCodec(ctx).encode(page.next, fingerprint) : null,
      has_more: page.next !== null || page.truncated === true,
      limit,
    },
  };
}

/** The spec's offset pagination block (usage and connections lists). */
export const offsetPagination = (total: number, q: { limit: number; offset: number }, returned: number) => ({
  total,
  limit: q.limit,
  offset: q.offset,
  has_more: q.offset + returned < total,
});
