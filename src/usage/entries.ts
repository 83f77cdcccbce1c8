import type { RowOf, usageEntries } from "../stores/series/tables.js";

/** A stored usage entry (the spec's usage record); `metadata` parsed back from its JSON. */
export interface UsageEntry {
  id: string;
  connection_id: string;
  entity: string;
  usage_amount: number;
  usage_entity: string;
  custom_name: string | null;
  cost_cents: number;
  workflow_id: string | null;
  execution_id: string | null;
  metadata: unknown;
  created_at: string;
}

export function toUsageEntry(r: RowOf<typeof usageEntries>): UsageEntry {
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
