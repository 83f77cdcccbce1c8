import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { invalidInput, notFound } from "../core/errors.js";
import { requireReadable } from "../connections/scope.js";
import { organizationsOf } from "../identity/key-service.js";
import { visibleConnectionsCondition } from "../identity/repository.js";
import { gatewayHeartbeats, gatewayModelUsage, usageEntries } from "../stores/series/tables.js";
import type { AggregateRow, Filter } from "../stores/series/types.js";
import { type SpendConnectionRow, spendConnections } from "./repository.js";

/**
 * The spend of an account over whole UTC days (the dashboard's Usage page): every connection the
 * caller can see, or the personal ones, or one organization's, or one connection; totals, a row
 * per day, by model or entity and by connection. The sums are PUT /v1/usage's (usage/totals.ts):
 * usage entries in cents, gateway heartbeats' US dollars converted to cents, `tokens` = entries
 * whose usage_entity is `tokens` plus heartbeat input and output tokens, amounts rounded to a
 * millionth of a cent. For one connection the totals equal PUT /v1/usage with
 * `start_date=<from>T00:00:00.000Z&end_date=<to>T23:59:59.999Z`; for several, their sum.
 *
 * The series store is separate from PostgreSQL, so the connections are named by id: in chunks of
 * `CHUNK` ids per query, so a large account never sends one huge list.
 */

const DAY = 86_400_000;
export const MAX_RANGE_DAYS = 400;
export const DEFAULT_RANGE_DAYS = 30;
export const RANGE_PRESETS = [7, 30, 90] as const;
/** Connection ids per series query. */
const CHUNK = 500;

/** A range of whole UTC days, both ends included. */
export interface SpendRange {
  /** YYYY-MM-DD */
  from: string;
  /** YYYY-MM-DD */
  to: string;
  /** 00:00:00.000Z of `from`. */
  start: Date;
  /** 23:59:59.999Z of `to` (inclusive, as PUT /v1/usage's end_date). */
  end: Date;
  days: number;
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const dayString = (d: Date) => d.toISOString().slice(0, 10);

function parseDay(field: string, v: string): Date {
  const m = DATE.exec(v);
  const d = m ? new Date(`${v}T00:00:00.000Z`) : null;
  if (!d || Number.isNaN(d.getTime()) || dayString(d) !== v)
    throw invalidInput(field, `"${v.slice(0, 40)}" is not a date; use YYYY-MM-DD, e.g. 2026-11-01`);
  return d;
}

/**
 * The range asked for: `days` (the last N days up to today, UTC, today included), or `from` and
 * `to` (either may be left out: `to` defaults to today, `from` to 29 days before `to`). 400 with
 * the field named when a date is malformed, `from` is after `to`, or the range is longer than
 * 400 days.
 */
export function parseSpendRange(q: { from?: string; to?: string; days?: string }, now: Date): SpendRange {
  const today = new Date(`${dayString(now)}T00:00:00.000Z`);
  let start: Date;
  let endDay: Date;
  const from = q.from?.trim() ?? "";
  const to = q.to?.trim() ?? "";
  const days = q.days?.trim() ?? "";
  if (days && !from && !to) {
    if (!/^\d{1,4}$/.test(days) || Number(days) < 1 || Number(days) > MAX_RANGE_DAYS)
      throw invalidInput("days", `must be a whole number of days from 1 to ${MAX_RANGE_DAYS}`);
    endDay = today;
    start = new Date(today.getTime() - (Number(days) - 1) * DAY);
  } else {
    endDay = to ? parseDay("to", to) : today;
    start = from ? parseDay("from", from) : new Date(endDay.getTime() - (DEFAULT_RANGE_DAYS - 1) * DAY);
    if (start.getTime() > endDay.getTime())
      throw invalidInput("from", `must not be after to (${dayString(start)} is after ${dayString(endDay)})`);
  }
  const n = Math.round((endDay.getTime() - start.getTime()) / DAY) + 1;
  if (n > MAX_RANGE_DAYS)
    throw invalidInput("to", `the range is at most ${MAX_RANGE_DAYS} days; this one is ${n} days`);
  return {
    from: dayString(start),
    to: dayString(endDay),
    start,
    end: new Date(endDay.getTime() + DAY - 1),
    days: n,
  };
}

/** Which part of the account: everything visible, `personal`, or an organization's id; and optionally one connection. */
export interface SpendScope {
  organizationId?: string | null;
  connectionId?: string | null;
}

export interface SpendConnection {
  id: string;
  name: string;
  serviceType: string;
  organization: { id: string; name: string } | null;
}

const toConnection = (r: SpendConnectionRow): SpendConnection => ({
  id: r.id,
  name: r.service_name,
  serviceType: r.service_type,
  organization: r.organization_id
    ? { id: r.organization_id, name: r.organization_name ?? r.organization_id }
    : null,
});

/** Every connection the caller can see, by name (the connection filter's choices). */
export async function spendConnectionChoices(ctx: AppContext, actor: Actor): Promise<SpendConnection[]> {
  const rows = await spendConnections(
    ctx.stores.db,
    (param) => visibleConnectionsCondition(actor, param),
    {},
  );
  return rows.map(toConnection);
}

export interface SpendFigures {
  entries: number;
  heartbeats: number;
  tokens: number;
  /** Cents, to a millionth. */
  cost_cents: number;
}

export interface AccountSpend {
  range: SpendRange;
  /** How many connections the report covers. */
  connections: number;
  totals: SpendFigures & { cost_usd: number };
  /** One row per day of the range, oldest first (days without usage are zeros). */
  byDay: (SpendFigures & { day: string })[];
  /** Usage-entry entities and gateway models, highest cost first. */
  byModel: {
    name: string;
    source: "entries" | "gateway";
    entries: number;
    tokens: number;
    cost_cents: number;
  }[];
  /** Connections with any usage in the range, highest cost first. */
  byConnection: (SpendFigures & { connection: SpendConnection })[];
  /** Models whose usage arrived without a cost and that the pricing table does not know (counted at 0). */
  unpricedModels: string[];
}

const roundCents = (c: number) => Math.round(c * 1e6) / 1e6;
const cents = (usd: number) => roundCents(usd * 100);
const num = (v: unknown) => (typeof v === "number" ? v : 0);
const zero = (): SpendFigures => ({ entries: 0, heartbeats: 0, tokens: 0, cost_cents: 0 });
const bucketDay = (r: AggregateRow) => dayString(new Date(r.bucket as Date | string));

/**
 * The spend of the part of the account the scope names over `range`. 404 for an organization the
 * caller is not in; 404/403 for a connection that does not exist or that the caller cannot see
 * (as PUT /v1/usage).
 */
export async function accountSpend(
  ctx: AppContext,
  actor: Actor,
  q: { range: SpendRange } & SpendScope,
): Promise<AccountSpend> {
  const org = q.organizationId?.trim() || null;
  const connectionId = q.connectionId?.trim() || null;
  if (org && org !== "personal") {
    const mine = await organizationsOf(ctx, actor);
    if (!mine.some((o) => o.id === org)) throw notFound(`No organization ${org.slice(0, 100)} among yours`);
  }
  if (connectionId) await requireReadable(ctx, actor, connectionId);
  let rows = await spendConnections(ctx.stores.db, (param) => visibleConnectionsCondition(actor, param), {
    organizationId: org,
  });
  if (connectionId) rows = rows.filter((r) => r.id === connectionId);
  const connections = new Map(rows.map((r) => [r.id, toConnection(r)]));

  const { range } = q;
  const span = { since: range.start, until: new Date(range.end.getTime() + 1) };
  const days = new Map<string, SpendFigures & { day: string }>();
  for (let t = range.start.getTime(); t <= range.end.getTime(); t += DAY) {
    const day = dayString(new Date(t));
    days.set(day, { day, ...zero() });
  }
  const perConnection = new Map<string, SpendFigures>();
  const ofConnection = (id: string) => {
    let f = perConnection.get(id);
    if (!f) perConnection.set(id, (f = zero()));
    return f;
  };
  const entities = new Map<string, { entries: number; tokens: number; cost_cents: number }>();
  const models = new Map<string, { tokens: number; cost_cents: number; unpriced: boolean }>();
  let entryCents = 0;
  let heartbeatUsd = 0;
  const totals = zero();

  const series = ctx.stores.series;
  const ids = [...connections.keys()];
  for (let i = 0; i < ids.length; i += CHUNK) {
    const where: Filter[] = [{ column: "connection_id", op: "in", value: ids.slice(i, i + CHUNK) }];
    const [groups, daily, hbs, hbDaily, byModel] = await Promise.all([
      // the groups of PUT /v1/usage's by_entity/by_unit, per connection
      series.aggregate(usageEntries, {
        bucket: "all",
        where,
        ...span,
        groupBy: ["connection_id", "entity", "usage_entity", "custom_name"],
        measures: {
          entries: { fn: "count" },
          amount: { fn: "sum", column: "usage_amount" },
          cost: { fn: "sum", column: "cost_cents" },
        },
      }),
      series.aggregate(usageEntries, {
        bucket: "day",
        where,
        ...span,
        groupBy: ["usage_entity"],
        measures: {
          entries: { fn: "count" },
          amount: { fn: "sum", column: "usage_amount" },
          cost: { fn: "sum", column: "cost_cents" },
        },
      }),
      series.aggregate(gatewayHeartbeats, {
        bucket: "all",
        where,
        ...span,
        groupBy: ["connection_id"],
        measures: {
          heartbeats: { fn: "count" },
          input: { fn: "sum", column: "input_tokens" },
          output: { fn: "sum", column: "output_tokens" },
          cost: { fn: "sum", column: "cost_usd" },
        },
      }),
      series.aggregate(gatewayHeartbeats, {
        bucket: "day",
        where,
        ...span,
        measures: {
          heartbeats: { fn: "count" },
          input: { fn: "sum", column: "input_tokens" },
          output: { fn: "sum", column: "output_tokens" },
          cost: { fn: "sum", column: "cost_usd" },
        },
      }),
      series.aggregate(gatewayModelUsage, {
        bucket: "all",
        where,
        ...span,
        groupBy: ["model", "cost_source"],
        measures: {
          input: { fn: "sum", column: "input_tokens" },
          output: { fn: "sum", column: "output_tokens" },
          cost: { fn: "sum", column: "cost_usd" },
        },
      }),
    ]);

    for (const g of groups) {
      const tokens = g.usage_entity === "tokens" ? num(g.amount) : 0;
      const c = ofConnection(String(g.connection_id));
      c.entries += num(g.entries);
      c.tokens += tokens;
      c.cost_cents += num(g.cost);
      const e = entities.get(String(g.entity)) ?? { entries: 0, tokens: 0, cost_cents: 0 };
      e.entries += num(g.entries);
      e.tokens += tokens;
      e.cost_cents += num(g.cost);
      entities.set(String(g.entity), e);
      totals.entries += num(g.entries);
      totals.tokens += tokens;
    }
    for (const d of daily) {
      const day = days.get(bucketDay(d));
      if (!day) continue;
      day.entries += num(d.entries);
      if (d.usage_entity === "tokens") day.tokens += num(d.amount);
      day.cost_cents += num(d.cost);
    }
    for (const h of hbs) {
      const c = ofConnection(String(h.connection_id));
      c.heartbeats += num(h.heartbeats);
      c.tokens += num(h.input) + num(h.output);
      c.cost_cents += cents(num(h.cost));
      totals.heartbeats += num(h.heartbeats);
      totals.tokens += num(h.input) + num(h.output);
      heartbeatUsd += num(h.cost);
    }
    for (const h of hbDaily) {
      const day = days.get(bucketDay(h));
      if (!day) continue;
      day.heartbeats += num(h.heartbeats);
      day.tokens += num(h.input) + num(h.output);
      day.cost_cents += cents(num(h.cost));
    }
    for (const m of byModel) {
      const name = String(m.model);
      const row = models.get(name) ?? { tokens: 0, cost_cents: 0, unpriced: false };
      row.tokens += num(m.input) + num(m.output);
      row.cost_cents += cents(num(m.cost));
      if (m.cost_source === "unpriced" && num(m.input) + num(m.output) > 0) row.unpriced = true;
      models.set(name, row);
    }
  }

  // as PUT /v1/usage: each entity's cents rounded, then summed with the heartbeats' converted cost
  for (const e of entities.values()) {
    e.cost_cents = roundCents(e.cost_cents);
    entryCents += e.cost_cents;
  }
  totals.cost_cents = roundCents(entryCents + cents(heartbeatUsd));
  for (const d of days.values()) d.cost_cents = roundCents(d.cost_cents);
  for (const c of perConnection.values()) c.cost_cents = roundCents(c.cost_cents);

  const byCost = (a: { cost_cents: number; name: string }, b: { cost_cents: number; name: string }) =>
    b.cost_cents - a.cost_cents || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  return {
    range,
    connections: connections.size,
    totals: { ...totals, cost_usd: Math.round(totals.cost_cents * 1e6) / 1e8 },
    byDay: [...days.values()],
    byModel: [
      ...[...entities].map(([name, e]) => ({ name, source: "entries" as const, ...e })),
      ...[...models].map(([name, m]) => ({
        name,
        source: "gateway" as const,
        entries: 0,
        tokens: m.tokens,
        cost_cents: roundCents(m.cost_cents),
      })),
    ].sort(byCost),
    byConnection: [...perConnection]
      .filter(([id]) => connections.has(id))
      .map(([id, f]) => ({ ...f, connection: connections.get(id) as SpendConnection }))
      .sort((a, b) => b.cost_cents - a.cost_cents || (a.connection.name < b.connection.name ? -1 : 1)),
    unpricedModels: [...models].filter(([, m]) => m.unpriced).map(([name]) => name),
  };
}

/** Cents as dollars with two decimals, as a person reads money: 123.4 → "$1.23", -5 → "-$0.05". */
export function formatUsd(cents: number): string {
  const whole = Math.round(cents);
  const sign = whole < 0 ? "-" : "";
  const abs = Math.abs(whole);
  const dollars = Math.floor(abs / 100).toLocaleString("en-US");
  return `${sign}$${dollars}.${String(abs % 100).padStart(2, "0")}`;
}
