import type { Position } from "../stores/series/types.js";

export type { Position };

/**
 * One newest-first page of a query: its rows and the position the next page starts after
 * (null at the end). Transports shape it: REST signs the position into an opaque cursor, MCP
 * returns rows, the dashboard renders them.
 */
export interface Page<R> {
  rows: R[];
  next: Position | null;
  /** More rows exist than were returned though no position continues them (aggregates cut at the limit). */
  truncated?: boolean;
}

/** How much of a paged query to return, and after which row (a position from an earlier page). */
export interface PageRequest {
  limit: number;
  after?: Position;
}

/** A time window: `since` inclusive, `until` exclusive; either may be open. */
export interface Window {
  since?: Date;
  until?: Date;
}
