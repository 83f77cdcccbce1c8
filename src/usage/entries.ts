import type { RowOf, usageEntries } from "../stores/series/tables.js";

/** A stored usage entry as the API returns it. */
export function toUsageEntry(r: RowOf<typeof usageEntries>) {
  let metadata: unknown = null;
  if (r.metadata) {
    try {
      metadata = JSON.parse(r.metadata);
    } catch {
      metadata = null;
    }
  }
  return {
    id: r.id,
    connection_id: r.connection_id,
    entity: r.entity,
    usage_amount: r.usage_amount,
    usage_entity: r.usage_entity,
    custom_name: r.custom_name ?? null,
    cost_cents: r.cost_cents,
    workflow_id: r.workflow_id ?? null,
    execution_id: r.execution_id ?? null,
    metadata,
    created_at: r.ts.toISOString(),
  };
}
