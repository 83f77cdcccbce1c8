import t from "tap";
import { ServiceError } from "../../src/core/errors.js";
import { fromServiceError } from "../../src/http/errors.js";
import { decodeCursor, restPage } from "../../src/http/paging.js";
import { readFingerprint } from "../../src/http/routes/read.js";
import { testApp } from "../helpers/app.js";

/** The REST paging helpers the read routes shape plain pages with (cursors live only at the edge). */
t.test("restPage signs the next position; decodeCursor gives it back for the same query only", async (t) => {
  const { ctx } = await testApp(t);
  const query = { connection_id: "c1", since: "2026-01-01T00:00:00Z", limit: 10, cursor: "x" };
  const bound = { endpoint: "availability", filters: [] };
  const fp = readFingerprint(query, bound);
  t.equal(fp, readFingerprint({ ...query, limit: 500, cursor: undefined }, bound), "limit and cursor aside");
  t.not(fp, readFingerprint(query, { ...bound, endpoint: "executions" }), "bound to the endpoint");
  t.not(fp, readFingerprint({ ...query, connection_id: "c2" }, bound), "to the connection");
  t.not(fp, readFingerprint(query, { ...bound, filters: [{ column: "available" }] }), "and to the filters");

  const next = { ts: new Date("2026-01-02T03:04:05.678Z"), key: ["c1", "e9"] };
  const page = restPage(ctx, { rows: [1, 2], next }, 2, fp);
  t.same(page.data, [1, 2]);
  t.match(page.pagination, { next_cursor: String, has_more: true, limit: 2 });
  t.same(decodeCursor(ctx, page.pagination.next_cursor ?? undefined, fp), next);
  t.equal(decodeCursor(ctx, undefined, fp), undefined, "no cursor: the first page");

  t.same(restPage(ctx, { rows: [], next: null }, 5, fp).pagination, {
    next_cursor: null,
    has_more: false,
    limit: 5,
  });
  t.same(
    restPage(ctx, { rows: [1], next: null, truncated: true }, 1, fp).pagination,
    { next_cursor: null, has_more: true, limit: 1 },
    "an aggregate cut at the limit has more, with no cursor",
  );

  const other = readFingerprint(query, { ...bound, endpoint: "executions" });
  for (const [cursor, message] of [
    [page.pagination.next_cursor ?? "", /different query/],
    ["forged.sig", /signature does not match/],
    ["nonsense", /not a cursor this API issued/],
  ] as const) {
    try {
      decodeCursor(ctx, cursor, other);
      t.fail("a foreign cursor is refused");
    } catch (err) {
      t.ok(err instanceof ServiceError);
      const rest = fromServiceError(err as ServiceError);
      t.equal(rest.statusCode, 400);
      t.equal(rest.code, "INVALID_CURSOR");
      t.match(rest.message, message);
    }
  }
});
