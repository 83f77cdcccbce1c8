import type { GroupCommit } from "./group-commit.js";
import type { SeriesTable } from "./tables.js";
import type { SeriesStore } from "./types.js";
import { validateRows } from "./validate.js";

export interface WriteItem {
  table: SeriesTable;
  row: Record<string, unknown> & { ts: Date };
}

/**
 * `append` and `write` for every backend: validate every row of every table first (so a bad
 * row rejects the whole call and nothing partial is stored), then hand them all to the
 * backend's group commit as one submission.
 */
export function groupCommitWrites(
  commit: GroupCommit<WriteItem>,
): Pick<SeriesStore, "append" | "write" | "backlog"> {
  const write: SeriesStore["write"] = (batches) => {
    const items: WriteItem[] = [];
    try {
      for (const b of batches) {
        validateRows(b.table, b.rows);
        for (const row of b.rows) items.push({ table: b.table, row: row as unknown as WriteItem["row"] });
      }
    } catch (err) {
      return Promise.reject(err as Error); // a bad row rejects the call, as an async write would
    }
    return commit.submit(items);
  };
  return {
    write,
    backlog: () => commit.backlog,
    append: (table, rows) => write([{ table, rows } as Parameters<typeof write>[0][number]]),
  };
}
