import type { AppContext } from "../core/context.js";
import { hasUnresolved } from "../incidents/repository.js";
import {
  type IncidentTarget,
  type MailText,
  notifyOpenIncident,
  openIncident,
  resolveIncident,
} from "../incidents/incidents.js";
import { sloBurnEvaluations } from "../lib/metrics.js";
import {
  type BurnAlert,
  type BurnCounts,
  burnCounts,
  type BurnRates,
  burnRates,
  type BurnSeverity,
  type BurnVerdict,
  judgeBurn,
} from "./burn.js";
import {
  lockSloBurn,
  recordBurn,
  recordEvaluated,
  selectOrphanBurnIncidents,
  selectSlosForBurn,
  type SloBurnRow,
} from "./repository.js";

/**
 * The SLO burn-rate job (every minute, under its lock; jobs/jobs.ts): evaluates every SLO's burn
 * rates against the workbook's alert conditions (burn.ts) and keeps the connection's `slo_burn`
 * incident in step with the incidents domain's rules:
 *
 * - a condition starts to hold: the incident opens (an alert of kind `slo_burn`: a page triggers
 *   paging channels, a ticket reaches them as a plain message);
 * - a ticket becomes a page while the incident is open: one more `slo_burn` alert, which triggers;
 * - no condition holds any more: the incident resolves (a recovery); the short windows make that
 *   happen minutes after the failures stop;
 * - edge-triggered: an incident a person resolved while the burn goes on is not reopened until
 *   the burn has stopped and starts again; one acknowledged gets no further alert;
 * - an SLO removed: its incident resolves at the next run.
 *
 * Bounded work per run: `slos` SLOs, least recently evaluated first, read `chunk` at a time (one
 * series statement per burn window for the whole chunk).
 */
export const SLO_BURN_LIMITS = { slos: 5_000, chunk: 500, sweep: 200 };

export interface SloBurnRun {
  evaluated: number;
  opened: number;
  raised: number;
  resolved: number;
  /** SLOs whose decision failed (logged; tried again at the next run). */
  failed: number;
}

const targetOf = (r: Pick<SloBurnRow, "connection_id" | "service_name" | "user_id" | "organization_id">) =>
  ({
    connectionId: r.connection_id,
    connectionName: r.service_name,
    userId: r.user_id,
    organizationId: r.organization_id,
  }) satisfies IncidentTarget;

const x = (n: number | null) => (n === null ? "n/a" : `${Math.round(n * 100) / 100}×`);
const WINDOW_WORDS: Record<string, string> = {
  "5m": "5 minutes",
  "30m": "30 minutes",
  "1h": "hour",
  "6h": "6 hours",
  "1d": "day",
  "3d": "3 days",
};

/** The condition in words: "burn rate 36× over the last hour and 40× over the last 5 minutes (page at 14.4×)". */
function conditionWords(alert: BurnAlert, threshold: number, rates: BurnRates): string {
  return (
    `burn rate ${x(rates[alert.long])} over the last ${WINDOW_WORDS[alert.long]} and ` +
    `${x(rates[alert.short])} over the last ${WINDOW_WORDS[alert.short]} (${alert.severity} at ${x(threshold)})`
  );
}

function burnMail(
  ctx: AppContext,
  slo: SloBurnRow,
  v: BurnVerdict & { alert: BurnAlert; threshold: number; severity: BurnSeverity },
  raised: boolean,
): MailText {
  const name = slo.service_name;
  const pct = `${Math.round(slo.objective * 100_000) / 1000} %`;
  const spent = Math.round(v.alert.budgetShare * 100);
  const rates = Object.entries(v.rates)
    .map(([w, r]) => `${w} ${x(r)}`)
    .join(", ");
  return {
    kind: "slo_burn",
    ...(v.severity === "ticket" ? { event: "info" as const } : {}),
    subject:
      v.severity === "page"
        ? `[Vigil] ${name} is burning its error budget fast${raised ? " (now paging)" : ""}`
        : `[Vigil] ${name} is burning its error budget (ticket)`,
    body:
      `${name} is spending its error budget too fast for its SLO of ${pct} over ${slo.window_days} days: ` +
      `${conditionWords(v.alert, v.threshold, v.rates)}.\n` +
      `At this rate ${spent} % of the ${slo.window_days}-day budget goes within the ${WINDOW_WORDS[v.alert.long]}.\n` +
      `Burn rates: ${rates}.\n\n${ctx.config.publicUrl}/v1/connections/${slo.connection_id}/slo\n`,
  };
}

function recoveredMail(ctx: AppContext, name: string, connectionId: string, why: string): MailText {
  return {
    kind: "recovery",
    subject: `[Vigil] ${name}: error budget burn back under its alert thresholds`,
    body: `${name} ${why}.\n\n${ctx.config.publicUrl}/v1/connections/${connectionId}/slo\n`,
  };
}

/** Evaluates one SLO on counts read before: one transaction holding its row. */
async function applyBurn(
  ctx: AppContext,
  slo: SloBurnRow,
  counts: BurnCounts,
  at: Date,
  run: SloBurnRun,
): Promise<void> {
  await ctx.stores.db.transaction(async (tx) => {
    const now = await lockSloBurn(tx, slo.connection_id);
    if (!now) return; // removed meanwhile: the sweep resolves its incident
    // the objective or window may have changed since the list was read
    const current = { ...slo, objective: now.objective, window_days: now.window_days };
    const v = judgeBurn(burnRates(counts, current.objective), current.window_days, current.objective);
    const before = now.burn_severity;
    const target = targetOf(slo);
    // the severity recorded: what an alert was sent for; null when no incident stands for it (one
    // could not open under a maintenance window), so it opens at the next run that finds it burning
    let recorded = v.severity;
    if (v.severity && v.alert && v.threshold !== null) {
      const verdict = { ...v, severity: v.severity, alert: v.alert, threshold: v.threshold };
      const detail = {
        severity: v.severity,
        objective: current.objective,
        window_days: current.window_days,
        long_window: v.alert.long,
        short_window: v.alert.short,
        threshold: v.threshold,
        burn_rates: v.rates,
        summary: conditionWords(v.alert, v.threshold, v.rates),
      };
      if (before === null) {
        const opened = await openIncident(tx, target, {
          kind: "slo_burn",
          title: `${slo.service_name} is burning its error budget`,
          detail,
          at,
          publicUrl: ctx.config.publicUrl,
          mail: burnMail(ctx, current, verdict, false),
        });
        if (opened) run.opened++;
        else if (!(await hasUnresolved(tx, slo.connection_id, "slo_burn"))) recorded = null;
      } else if (before === "ticket" && v.severity === "page") {
        const told = await notifyOpenIncident(
          tx,
          target,
          "slo_burn",
          at,
          burnMail(ctx, current, verdict, true),
        );
        if (told) run.raised++;
        else if (!(await hasUnresolved(tx, slo.connection_id, "slo_burn"))) recorded = null;
      }
    } else if (before !== null) {
      const resolved = await resolveIncident(tx, target, {
        kind: "slo_burn",
        detail: { burn_rates: v.rates, objective: current.objective, window_days: current.window_days },
        reason: "no burn-rate alert condition holds (the short windows are back under their thresholds)",
        at,
        publicUrl: ctx.config.publicUrl,
        mail: recoveredMail(
          ctx,
          slo.service_name,
          slo.connection_id,
          "is no longer burning its error budget faster than its alert thresholds",
        ),
      });
      if (resolved) run.resolved++;
    }
    await recordBurn(tx, slo.connection_id, recorded, at);
  });
}

/** One run of the burn-rate job at `ctx.now()`. */
export async function runSloBurnChecks(ctx: AppContext, limits = SLO_BURN_LIMITS): Promise<SloBurnRun> {
  const at = ctx.now();
  const run: SloBurnRun = { evaluated: 0, opened: 0, raised: 0, resolved: 0, failed: 0 };
  const slos = await selectSlosForBurn(ctx.stores.db, limits.slos);
  // samples acknowledged to a writer are counted (QuestDB applies its write-ahead log shortly after)
  if (slos.length) await ctx.stores.series.waitVisible();
  for (let i = 0; i < slos.length; i += limits.chunk) {
    const chunk = slos.slice(i, i + limits.chunk);
    const counts = await burnCounts(
      ctx,
      chunk.map((s) => s.connection_id),
      at,
    );
    const unchanged: string[] = [];
    for (const slo of chunk) {
      const c = counts.get(slo.connection_id);
      if (!c) continue;
      run.evaluated++;
      sloBurnEvaluations.inc();
      // the steady state (the same severity as last time, nothing to open, raise or resolve):
      // one statement for the whole chunk instead of a transaction per SLO
      if (
        judgeBurn(burnRates(c, slo.objective), slo.window_days, slo.objective).severity === slo.burn_severity
      )
        unchanged.push(slo.connection_id);
      else
        try {
          // counted once its transaction committed (a decision that failed counts nothing)
          const done = { evaluated: 0, opened: 0, raised: 0, resolved: 0, failed: 0 };
          await applyBurn(ctx, slo, c, at, done);
          run.opened += done.opened;
          run.raised += done.raised;
          run.resolved += done.resolved;
        } catch (err) {
          // one SLO that cannot be applied must not hold up the others: it goes to the back of
          // the line (evaluated now) and is tried again at the next run
          run.failed++;
          unchanged.push(slo.connection_id);
          ctx.log.warn(
            { job: "slo-burn", connectionId: slo.connection_id, err: (err as Error).message },
            "SLO burn evaluation failed; retried at the next run",
          );
        }
    }
    if (unchanged.length) await recordEvaluated(ctx.stores.db, unchanged, at);
  }
  for (const o of await selectOrphanBurnIncidents(ctx.stores.db, limits.sweep)) {
    const resolved = await ctx.stores.db.transaction((tx) =>
      resolveIncident(tx, targetOf(o), {
        kind: "slo_burn",
        detail: { reason: "slo_removed" },
        reason: "no SLO holds it any more (removed, or set again and not burning)",
        at,
        publicUrl: ctx.config.publicUrl,
        mail: recoveredMail(
          ctx,
          o.service_name,
          o.connection_id,
          "has no SLO burning its budget any more (the SLO was removed or set anew)",
        ),
      }),
    );
    if (resolved) run.resolved++;
  }
  if (run.opened || run.raised || run.resolved || run.failed)
    ctx.log.info({ job: "slo-burn", ...run }, "SLO burn rates checked");
  return run;
}
