import { z } from "zod";

/**
 * Building blocks of the response schemas. Response schemas describe what the server sends, so
 * the OpenAPI document renders them with `io: "output"`; the response test validates every real
 * body against that document.
 */

/** An ISO 8601 timestamp as the API writes it (`toISOString`, always UTC). */
export const timestamp = z.iso.datetime();

/**
 * Documents a closed set of values while the query code types the field as a plain string
 * (a column read back from a store): the pipe's input is `string`, its output (what the
 * document shows) the enum.
 */
export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.string().pipe(z.enum(values));

/** Any JSON value (configuration, metadata, event details), stored and returned as given. */
export const anyJson = z.unknown().describe("any JSON value");

/** The read API's cursor pagination (spec: Limits). */
export const cursorPagination = z.object({
  next_cursor: z.string().nullable().describe("pass back as `cursor` for the next page; null at the end"),
  has_more: z.boolean(),
  limit: z.number().int(),
});

/** One page of the read API. */
export const cursorPage = <R extends z.ZodType>(row: R) =>
  z.object({ data: z.array(row), pagination: cursorPagination });

/** Offset pagination of the connections and usage lists. */
export const offsetPagination = z.object({
  total: z.number().int(),
  limit: z.number().int(),
  offset: z.number().int(),
  has_more: z.boolean(),
});
