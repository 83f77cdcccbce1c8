import type { Queryable } from "../stores/relational/types.js";
import type { AlertAccount } from "../notifications/account.js";
import {
  type ChannelRow,
  incidentKindOf,
  pagedChannels,
  type RuleRow,
  selectAccountChannels,
  selectAccountRules,
  selectAlertEmail,
} from "./repository.js";
import { type AlertEvent, PAGING_TYPES } from "./providers/types.js";

/**
 * Routing (docs/channels.md): which of an account's channels an alert goes to.
 *
 * - An account with channels and no routing rule sends every alert to all of its channels
 *   (adding a Slack channel just works), except audits, which reach a paging provider
 *   (PagerDuty, Opsgenie) only through a rule naming it.
 * - Once the account has rules, an alert goes to the channels of every rule that matches it
 *   (its kind, its connection, and for a recovery the rule's `send_recoveries`); one no rule
 *   matches goes to e-mail only.
 * - E-mail to the account's owners (and an organization's admins) stays on whatever the rules
 *   say, unless the account turns it off (PUT /v1/notification-settings).
 * - A paging provider's incident is Vigil's: a recovery resolves it on exactly the paging
 *   channels that were sent its trigger (whatever `send_recoveries` says: an incident left open
 *   at PagerDuty pages someone for nothing), and an acknowledgement acknowledges it there.
 */

/** The kinds a routing rule names: the alert history's kinds (a recovery follows its failure's rule). */
export const ROUTING_KINDS = [
  "failure",
  "missed_heartbeat",
  "anomaly",
  "budget_warning",
  "slo_burn",
  "audit",
] as const;
export type RoutingKind = (typeof ROUTING_KINDS)[number];

/** Alert kinds that routing decides (invitations go to their invitee only). */
const ROUTED = new Set(["failure", "recovery", "anomaly", "budget_warning", "slo_burn", "audit"]);

export interface RoutedChannel {
  channel: ChannelRow;
  event: AlertEvent;
}

export interface RoutePlan {
  /** Whether the account's owners get it by e-mail. */
  emailOwners: boolean;
  channels: RoutedChannel[];
  /** Rules whose escalation this alert starts (an incident's opening alert only). */
  escalations: RuleRow[];
}

/** An opening kind's routing kind, for the recovery that ends it. */
const OPENING_KIND: Record<string, RoutingKind> = {
  availability: "failure",
  missed_heartbeat: "missed_heartbeat",
  anomaly: "anomaly",
  budget: "budget_warning",
  slo_burn: "slo_burn",
};

const matches = (r: RuleRow, kind: RoutingKind, connectionId: string | null, recovery: boolean) =>
  (r.kinds === null || r.kinds.includes(kind)) &&
  (r.connection_ids === null || (connectionId !== null && r.connection_ids.includes(connectionId))) &&
  (!recovery || r.send_recoveries);

export async function routeAlert(
  tx: Queryable,
  account: AlertAccount,
  a: { kind: string; connectionId: string | null; incidentId: string | null; event?: "info" },
): Promise<RoutePlan | null> {
  if (!ROUTED.has(a.kind)) return null;
  const emailOwners = await selectAlertEmail(tx, account);
  const channels = await selectAccountChannels(tx, account);
  if (channels.length === 0) return { emailOwners, channels: [], escalations: [] };
  const incidentKind = a.incidentId ? await incidentKindOf(tx, a.incidentId) : null;
  const recovery = a.kind === "recovery";
  const kind: RoutingKind = recovery
    ? (OPENING_KIND[incidentKind ?? "availability"] ?? "failure")
    : a.kind === "failure" && incidentKind === "missed_heartbeat"
      ? "missed_heartbeat"
      : (a.kind as RoutingKind);
  const rules = await selectAccountRules(tx, account);
  let chosen: ChannelRow[];
  let matched: RuleRow[] = [];
  if (rules.length === 0) chosen = channels.filter((c) => kind !== "audit" || !PAGING_TYPES.includes(c.type));
  else {
    matched = rules.filter((r) => matches(r, kind, a.connectionId, recovery));
    const ids = new Set(matched.flatMap((r) => r.channel_ids));
    chosen = channels.filter((c) => ids.has(c.id));
  }
  // a plain message about an incident (an SLO burn worth a ticket) is no page: a paging provider
  // would open an incident of its own that nothing ever closes
  if (!recovery && a.event === "info") chosen = chosen.filter((c) => !PAGING_TYPES.includes(c.type));
  const event: AlertEvent = recovery
    ? "resolve"
    : a.incidentId && kind !== "audit" && a.event !== "info"
      ? "trigger"
      : "info";
  if (recovery && a.incidentId) {
    // paging channels: exactly those its trigger reached (escalation channels included)
    const paged = new Set((await pagedChannels(tx, a.incidentId)).map((c) => c.id));
    chosen = [
      ...chosen.filter((c) => !PAGING_TYPES.includes(c.type)),
      ...channels.filter((c) => paged.has(c.id)),
    ];
  }
  const escalations =
    !recovery && event === "trigger"
      ? (rules.length === 0 ? [] : matched).filter((r) => r.escalate_after_minutes !== null)
      : [];
  return { emailOwners, channels: chosen.map((channel) => ({ channel, event })), escalations };
}
