import { markLate } from "../anomalies/late.js";
import { budgetWatch } from "../budgets/watch.js";
import { createHash, randomUUID } from "node:crypto";
import { conflict, forbidden, invalidInput, notFound, ServiceError } from "../core/errors.js";
import { issueMessage } from "../core/issues.js";
import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { connectionsAccess } from "../identity/visibility.js";
import { type RowOf, usageEntries } from "../stores/series/tables.js";
import { toUsageEntry } from "./entries.js";
import { claimIdempotencyKey } from "./repository.js";
import { MAX_BATCH, type UsageEntryInput, usageEntry } from "./schema.js";
import { usageEntriesIngested } from "../lib/metrics.js";

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

/** How long an Idempotency-Key is remembered at least (the retention job removes older claims). */
export const IDEMPOTENCY_HOURS = 24;
/** An Idempotency-Key: 1 to 255 visible ASCII characters (a UUID is the usual choice). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** The header's value checked, or undefined when it is absent. */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (Array.isArray(header))
    throw invalidInput("headers.idempotency-key", "is given more than once; send one key per request");
  if (!IDEMPOTENCY_KEY.test(header))
    throw invalidInput(
      "headers.idempotency-key",
      "must be 1 to 255 visible ASCII characters (a UUID is a good choice)",
    );
  return header;
}

/** A UUID (version 8, name-based) derived from the claim and the entry's index: the same on every resend. */
function entryId(scope: string, keySha256: string, index: number): string {
  const h = sha256(`${scope}\u0000${keySha256}\u0000${index}`);
  const variant = ((parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * POST /v1/usage: all entries or none, after checking the key reaches every connection.
 *
 * With an `idempotencyKey` (the Idempotency-Key header) a resend stores nothing twice: the first
 * request claims the key (scoped to the API key) in PostgreSQL before writing, which fixes the
 * batch's timestamp; every entry's id derives from the claim, so a resend writes the same rows,
 * which the series store's upsert key (ts, id) stores once, and answers what the first answered.
 * This covers the case a client cannot tell apart: the batch was committed and the answer lost
 * (a crash, a cut connection). The same key with another body within 24 hours is a 409.
 */
export async function recordUsage(
  ctx: AppContext,
  p: Actor,
  entries: UsageEntryInput[],
  opts: { idempotencyKey?: string } = {},
) {
  const access = await connectionsAccess(ctx.stores.db, p, [...new Set(entries.map((e) => e.connection_id))]);
  for (const [index, e] of entries.entries()) {
    const a = access.get(e.connection_id);
    if (a === "absent") throw notFound(`Connection ${e.connection_id} not found (entry ${index})`);
    if (a !== "ok") throw forbidden(`No access to connection ${e.connection_id} (entry ${index})`);
  }
  let created = ctx.now();
  let idOf = (_index: number): string => randomUUID();
  if (opts.idempotencyKey !== undefined) {
    const scope =
      p.type === "api_key" || p.type === "ingestion_key"
        ? p.keyId
        : `${p.type}:${"userId" in p ? p.userId : p.job}`;
    const keySha256 = sha256(opts.idempotencyKey);
    const bodySha256 = sha256(JSON.stringify(entries));
    const claim = await claimIdempotencyKey(ctx.stores.db, {
      scope,
      keySha256,
      bodySha256,
      entries: entries.length,
      at: created,
    });
    if (claim.body_sha256 !== bodySha256)
      throw conflict(
        `Idempotency-Key was used with a different batch at ${claim.recorded_at.toISOString()}; ` +
          `a key names one batch for ${IDEMPOTENCY_HOURS} hours: send a new key for a new batch`,
      );
    created = claim.recorded_at;
    idOf = (index) => entryId(scope, keySha256, index);
  }
  const rows: RowOf<typeof usageEntries>[] = entries.map((e, index) => ({
    ts: created,
    id: idOf(index),
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
  usageEntriesIngested.inc(rows.length);
  const late = markLate(ctx, rows); // entries dated in the past: the anomaly detector judges them again
  if (late) await late;
  // spend a budget counts is noticed now, not at the budget job's next run (budgets/watch.ts)
  const watch = budgetWatch(ctx);
  for (const r of rows) if (r.cost_cents > 0) watch.spent(r.connection_id, r.cost_cents, r.ts);
  return { message: "Usage recorded", count: rows.length, usage: rows.map(toUsageEntry) };
}
