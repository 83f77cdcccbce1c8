import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../core/context.js";
import { ServiceError } from "../../core/errors.js";
import { organizationsOf } from "../../identity/key-service.js";
import {
  accountSpend,
  type AccountSpend,
  formatUsd,
  MAX_RANGE_DAYS,
  parseSpendRange,
  RANGE_PRESETS,
  spendConnectionChoices,
} from "../../usage/account-spend.js";
import { fieldErrors, type FormErrors, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * Usage and cost: the spend of everything the signed-in user can see (or the personal part, one
 * organization, one connection) over whole UTC days, with totals equal to PUT /v1/usage
 * (usage/account-spend.ts), a row per day with a bar chart drawn as server-side SVG (the CSP
 * allows no inline style), by model or entity and by connection. Money is kept in cents and shown
 * in dollars.
 */

type Query = { from?: string; to?: string; days?: string; account?: string; connection?: string };

const one = (v: unknown) =>
  typeof v === "string" ? v.slice(0, 200) : Array.isArray(v) ? String(v[0] ?? "").slice(0, 200) : "";

/** The day chart: one bar per day, heights by cost (or by tokens when nothing cost money). */
function chartOf(spend: AccountSpend) {
  const byCost = spend.byDay.some((d) => d.cost_cents > 0);
  const value = (d: AccountSpend["byDay"][number]) => (byCost ? d.cost_cents : d.tokens);
  const max = Math.max(0, ...spend.byDay.map(value));
  if (max <= 0) return null;
  const n = spend.byDay.length;
  const H = 100;
  const W = Math.max(n * 10, 100);
  const slot = W / n;
  const bars = spend.byDay.map((d, i) => {
    const h = Math.max((value(d) / max) * H, value(d) > 0 ? 1 : 0);
    return {
      x: +(i * slot + slot * 0.1).toFixed(2),
      y: +(H - h).toFixed(2),
      w: +(slot * 0.8).toFixed(2),
      h: +h.toFixed(2),
      label: `${d.day}: ${formatUsd(d.cost_cents)}, ${d.tokens.toLocaleString("en-US")} tokens`,
    };
  });
  return {
    width: W,
    height: H,
    bars,
    measure: byCost ? "cost" : "tokens",
    maxLabel: byCost ? formatUsd(max) : `${max.toLocaleString("en-US")} tokens`,
  };
}

export async function registerUsagePages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  scope.get<{ Querystring: Query }>("/usage", async (req, reply) => {
    const actor = dashboardActor(req);
    const q = req.query as Record<string, unknown>;
    const filters = {
      from: one(q.from),
      to: one(q.to),
      days: one(q.days),
      account: one(q.account),
      connection: one(q.connection),
    };
    const [organizations, connections] = await Promise.all([
      organizationsOf(ctx, actor),
      spendConnectionChoices(ctx, actor),
    ]);
    let spend: AccountSpend | null = null;
    let errors: FormErrors = { fields: {}, form: null };
    let status = 200;
    try {
      const range = parseSpendRange(filters, ctx.now());
      spend = await accountSpend(ctx, actor, {
        range,
        organizationId: filters.account || null,
        connectionId: filters.connection || null,
      });
      // the form shows the range as dates, whichever way it was asked
      filters.from = range.from;
      filters.to = range.to;
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      errors = fieldErrors(err);
      // a preset that is wrong is reported on the dates
      if (errors.fields.days) errors.fields.from = errors.fields.days;
      status = statusOfError(err);
    }
    const link = (days: number) => {
      const p = new URLSearchParams({ days: String(days) });
      if (filters.account) p.set("account", filters.account);
      if (filters.connection) p.set("connection", filters.connection);
      return `/usage?${p}`;
    };
    return page(
      reply,
      "usage/index",
      {
        frame: frameOf(req, reply),
        filters,
        errors,
        organizations,
        connections,
        spend,
        chart: spend ? chartOf(spend) : null,
        presets: RANGE_PRESETS.map((d) => ({
          days: d,
          href: link(d),
          current: spend !== null && filters.days === String(d),
        })),
        maxDays: MAX_RANGE_DAYS,
        usd: formatUsd,
        int: (n: number) => n.toLocaleString("en-US", { maximumFractionDigits: 2 }),
        selected: connections.find((c) => c.id === filters.connection) ?? null,
      },
      status,
    );
  });
}
