import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { gatewayHeartbeats, gatewayModelUsage, usageEntries } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { connectionScope } from "../connections/scope.js";

const DAY = 86_400_000;

/** Totals of one connection, or of one workflow or run of it, between two instants (both inclusive). */
export interface UsageTotalsQuery {
  connectionId: string;
  workflowId?: string;
  executionId?: string;
  startDate?: Date;
  endDate?: Date;
}
/** Money as reported: cents to a millionth, so sums of fractional prices carry no float noise. */
const roundCents = (c: number) => Math.round(c * 1e6) / 1e6;
const cents = (usd: number) => roundCents(usd * 100);
const num = (v: unknown) => (typeof v === "number" ? v : 0);

/**
 * PUT /v1/usage: totals for one connection. Money is reported in cents throughout: usage
 * entries carry cents, heartbeat costs (US dollars) are converted. `tokens` counts usage
 * entries whose usage_entity is `tokens` plus the input and output tokens of heartbeats.
 * With execution_id (or workflow_id) the totals are those of that run (or workflow), over all
 * time unless dates are given, and heartbeats are not included. Without them the window is the
 * 30 days up to now. `endDate` is inclusive.
 */
export async function usageTotals(ctx: AppContext, p: Actor, q: UsageTotalsQuery) {
  const scope = (await connectionScope(ctx, p, q.connectionId)) as Filter;
  const run = q.workflowId !== undefined || q.executionId !== undefined;
  const end = q.endDate ?? (run ? undefined : ctx.now());
  const start = q.startDate ? q.startDate : run ? undefined : new Date((end as Date).getTime() - 30 * DAY);
  const range = { since: start, until: end ? new Date(end.getTime() + 1) : undefined };
  const where: Filter[] = [scope];
  if (q.workflowId !== undefined) where.push({ column: "workflow_id", op: "eq", value: q.workflowId });
  if (q.executionId !== undefined) where.push({ column: "execution_id", op: "eq", value: q.executionId });

  const series = ctx.stores.series;
  const groups = await series.aggregate(usageEntries, {
    bucket: "all",
    where,
    ...range,
    groupBy: ["entity", "usage_entity", "custom_name"],
    measures: {
      entries: { fn: "count" },
      amount: { fn: "sum", column: "usage_amount" },
      cost: { fn: "sum", column: "cost_cents" },
    },
  });

  const byEntity = new Map<string, { entity: string; entries: number; tokens: number; cost_cents: number }>();
  const byUnit = new Map<
    string,
    { usage_entity: string; custom_name: string | null; entries: number; amount: number; cost_cents: number }
  >();
  for (const g of groups) {
    const entity = String(g.entity);
    const unit = String(g.usage_entity);
    const custom = (g.custom_name as string | null) ?? null;
    const e = byEntity.get(entity) ?? { entity, entries: 0, tokens: 0, cost_cents: 0 };
    e.entries += num(g.entries);
    if (unit === "tokens") e.tokens += num(g.amount);
    e.cost_cents += num(g.cost);
    byEntity.set(entity, e);
    const key = `${unit}\u0000${custom ?? ""}`;
    const u = byUnit.get(key) ?? {
      usage_entity: unit,
      custom_name: custom,
      entries: 0,
      amount: 0,
      cost_cents: 0,
    };
    u.entries += num(g.entries);
    u.amount += num(g.amount);
    u.cost_cents += num(g.cost);
    byUnit.set(key, u);
  }

  let gateway = null;
  const unpriced: string[] = [];
  if (!run) {
    const [hb] = await series.aggregate(gatewayHeartbeats, {
      bucket: "all",
      where: [scope],
      ...range,
      measures: {
        heartbeats: { fn: "count" },
        input: { fn: "sum", column: "input_tokens" },
        output: { fn: "sum", column: "output_tokens" },
        cache_read: { fn: "sum", column: "cache_read_tokens" },
        cache_write: { fn: "sum", column: "cache_write_tokens" },
        requests: { fn: "sum", column: "request_count" },
        cost: { fn: "sum", column: "cost_usd" },
      },
    });
    if (hb && num(hb.heartbeats) > 0) {
      const models = await series.aggregate(gatewayModelUsage, {
        bucket: "all",
        where: [scope],
        ...range,
        groupBy: ["model", "cost_source"],
        measures: {
          input: { fn: "sum", column: "input_tokens" },
          output: { fn: "sum", column: "output_tokens" },
          cost: { fn: "sum", column: "cost_usd" },
        },
      });
      const byModel = new Map<
        string,
        {
          model: string;
          input_tokens: number;
          output_tokens: number;
          cost_cents: number;
          unpriced_tokens: number;
        }
      >();
      for (const m of models) {
        const model = String(m.model);
        const row = byModel.get(model) ?? {
          model,
          input_tokens: 0,
          output_tokens: 0,
          cost_cents: 0,
          unpriced_tokens: 0,
        };
        row.input_tokens += num(m.input);
        row.output_tokens += num(m.output);
        row.cost_cents += cents(num(m.cost));
        if (m.cost_source === "unpriced") row.unpriced_tokens += num(m.input) + num(m.output);
        byModel.set(model, row);
      }
      for (const m of byModel.values()) if (m.unpriced_tokens > 0) unpriced.push(m.model);
      gateway = {
        heartbeats: num(hb.heartbeats),
        input_tokens: num(hb.input),
        output_tokens: num(hb.output),
        cache_read_tokens: num(hb.cache_read),
        cache_write_tokens: num(hb.cache_write),
        requests: num(hb.requests),
        cost_cents: cents(num(hb.cost)),
        by_model: [...byModel.values()],
      };
    }
  }

  for (const e of byEntity.values()) e.cost_cents = roundCents(e.cost_cents);
  for (const u of byUnit.values()) u.cost_cents = roundCents(u.cost_cents);
  for (const m of gateway?.by_model ?? []) m.cost_cents = roundCents(m.cost_cents);
  const entries = [...byEntity.values()];
  const entryTokens = entries.reduce((s, e) => s + e.tokens, 0);
  const entryCents = entries.reduce((s, e) => s + e.cost_cents, 0);
  const totalCents = roundCents(entryCents + (gateway?.cost_cents ?? 0));
  return {
    connection_id: q.connectionId,
    workflow_id: q.workflowId ?? null,
    execution_id: q.executionId ?? null,
    start_date: start?.toISOString() ?? null,
    end_date: end?.toISOString() ?? null,
    totals: {
      entries: entries.reduce((s, e) => s + e.entries, 0),
      heartbeats: gateway?.heartbeats ?? 0,
      tokens: entryTokens + (gateway ? gateway.input_tokens + gateway.output_tokens : 0),
      cost_cents: totalCents,
      cost_usd: Math.round(totalCents * 1e6) / 1e8,
    },
    by_entity: entries,
    by_unit: [...byUnit.values()],
    gateway,
    unpriced_models: unpriced,
  };
}
