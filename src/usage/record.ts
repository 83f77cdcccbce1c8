import { randomUUID } from "node:crypto";
import { forbidden, notFound, ServiceError } from "../core/errors.js";
import { issueMessage } from "../core/issues.js";
import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { connectionsAccess } from "../identity/visibility.js";
import { type RowOf, usageEntries } from "../stores/series/tables.js";
import { toUsageEntry } from "./entries.js";
import { MAX_BATCH, type UsageEntryInput, usageEntry } from "./schema.js";

export interface ValidationProblem {
  index: number;
  field: string;
  message: string;
}

/**
 * Validates every entry and reports each failing one as `{index, field, message}` (the first
 * problem of that entry). One invalid entry rejects the whole request: nothing is stored.
 */
export function validateUsageBody(body: unknown): UsageEntryInput[] {
  const list = Array.isArray(body) ? body : [body];
  if (body === null || body === undefined || (typeof body !== "object" && !Array.isArray(body)))
    throw new ServiceError("invalid_input", "body: must be a usage entry or an array of entries", {
      field: "body",
      details: {},
    });
  if (list.length === 0)
    throw new ServiceError("invalid_input", "body: send at least one entry", { field: "body", details: {} });
  if (list.length > MAX_BATCH)
    throw new ServiceError(
      "invalid_input",
      `body: at most ${MAX_BATCH} entries per request, got ${list.length}`,
      {
        field: "body",
        details: { limit: MAX_BATCH },
      },
    );
  const problems: ValidationProblem[] = [];
  const entries: UsageEntryInput[] = [];
  list.forEach((item, index) => {
    const r = usageEntry.safeParse(item);
    if (r.success) entries.push(r.data);
    else {
      const issue = r.error.issues[0];
      const path = issue?.code === "unrecognized_keys" ? [...issue.path, issue.keys[0]] : (issue?.path ?? []);
      problems.push({
        index,
        field: path.map(String).join(".") || "entry",
        message: issue ? issueMessage(item, issue) : "is invalid",
      });
    }
  });
  if (problems.length > 0) {
    throw new ServiceError(
      "invalid_input",
      `${problems.length} of ${list.length} entries are invalid; nothing was stored`,
      { details: {}, items: problems },
    );
  }
  return entries;
}

/** POST /v1/usage: all entries or none, after checking the key reaches every connection. */
export async function recordUsage(ctx: AppContext, p: Actor, entries: UsageEntryInput[]) {
  const access = await connectionsAccess(ctx.stores.db, p, [...new Set(entries.map((e) => e.connection_id))]);
  for (const [index, e] of entries.entries()) {
    const a = access.get(e.connection_id);
    if (a === "absent") throw notFound(`Connection ${e.connection_id} not found (entry ${index})`);
    if (a !== "ok") throw forbidden(`No access to connection ${e.connection_id} (entry ${index})`);
  }
  const created = ctx.now();
  const rows: RowOf<typeof usageEntries>[] = entries.map((e) => ({
    ts: created,
    id: randomUUID(),
    connection_id: e.connection_id,
    entity: e.entity,
    usage_amount: e.usage_amount,
    usage_entity: e.usage_entity,
    custom_name: e.custom_name ?? null,
    cost_cents: e.cost_cents,
    workflow_id: e.workflow_id ?? null,
    execution_id: e.execution_id ?? null,
    metadata: e.metadata ? JSON.stringify(e.metadata) : null,
  }));
  await ctx.stores.series.append(usageEntries, rows);
  return { message: "Usage recorded", count: rows.length, usage: rows.map(toUsageEntry) };
}
