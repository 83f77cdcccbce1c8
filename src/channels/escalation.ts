import type { AppContext } from "../core/context.js";
import { appendEvent, enqueueToChannels, lockIncident } from "../incidents/repository.js";
import { underMaintenance } from "../maintenance/repository.js";
import { linksOf } from "./alert.js";
import {
  advanceEscalation,
  claimDueEscalations,
  postponeEscalation,
  selectAccountChannels,
  selectRuleById,
} from "./repository.js";

/** How soon a step held by a maintenance window is looked at again. */
const MAINTENANCE_RECHECK_MS = 60_000;

/**
 * Escalation and reminders (docs/channels.md): an incident a routing rule with
 * `escalate_after_minutes` matched, still open (not acknowledged, not resolved) that many minutes
 * after it opened, is sent to the rule's escalation channels (kind `escalation`), and again every
 * `repeat_every_minutes` while it stays open; a step due while its connection is under a
 * maintenance window waits for the window's end. Acknowledging or resolving it stops this: the job
 * finds it no longer open and drops the escalation. Each step is an `escalated` event in the
 * incident's timeline, with the rows it queued. Due escalations are claimed with SKIP LOCKED in
 * the transaction that queues their notifications, so two nodes never send one step twice.
 * Runs as the `escalations` job every 15 s (jobs/jobs.ts). Returns the steps taken.
 */
export async function runEscalations(ctx: AppContext, opts: { batch?: number } = {}): Promise<number> {
  const at = ctx.now();
  let steps = 0;
  await ctx.stores.db.transaction(async (tx) => {
    for (const e of await claimDueEscalations(tx, at, opts.batch ?? 100)) {
      const rule = await selectRuleById(tx, e.rule_id);
      const status = await lockIncident(tx, e.incident_id);
      if (status !== "open" || !rule || rule.escalate_after_minutes === null) {
        await advanceEscalation(tx, { incidentId: e.incident_id, ruleId: e.rule_id, nextAt: null });
        continue;
      }
      // a connection under maintenance pages nobody: the step waits for the window's end
      if (await underMaintenance(tx, e.connection_id, at)) {
        await postponeEscalation(tx, {
          incidentId: e.incident_id,
          ruleId: e.rule_id,
          nextAt: new Date(at.getTime() + MAINTENANCE_RECHECK_MS),
        });
        continue;
      }
      const account =
        e.organization_id !== null
          ? ({ scope: "organization", id: e.organization_id } as const)
          : ({ scope: "user", id: e.user_id } as const);
      const wanted = new Set(rule.escalation_channel_ids);
      const channels = (await selectAccountChannels(tx, account)).filter((c) => wanted.has(c.id));
      const minutes = Math.max(1, Math.round((at.getTime() - new Date(e.opened_at).getTime()) / 60_000));
      const step = Number(e.steps) + 1;
      const rows = await enqueueToChannels(tx, {
        kind: "escalation",
        account: { userId: e.user_id, organizationId: e.organization_id },
        connectionId: e.connection_id,
        incidentId: e.incident_id,
        subject: `[Vigil] ${step === 1 ? "Escalation" : "Reminder"}: ${e.connection_name} unacknowledged for ${minutes} min`,
        body:
          `${e.incident_title}\n` +
          `Open since ${new Date(e.opened_at).toISOString()} and not acknowledged ` +
          `(${step === 1 ? "escalated" : `reminder ${step - 1}`}).\n\n` +
          `${linksOf(ctx.config.publicUrl, e.connection_id, e.incident_id).incident ?? ""}\n`,
        at,
        channels,
        event: "trigger",
      });
      await appendEvent(tx, e.incident_id, at, "escalated", {
        rule_id: e.rule_id,
        step,
        reminder: step > 1,
        unacknowledged_minutes: minutes,
        channel_ids: channels.map((c) => c.id),
        notification_ids: rows.map((r) => r.id),
      });
      const repeat = rule.repeat_every_minutes;
      await advanceEscalation(tx, {
        incidentId: e.incident_id,
        ruleId: e.rule_id,
        nextAt: repeat === null ? null : new Date(at.getTime() + Number(repeat) * 60_000),
      });
      steps++;
    }
  });
  return steps;
}
