import type { IncidentKind, NotificationKind } from "./repository.js";

/** The connection an incident is about, as its e-mails name it. */
export interface IncidentTarget {
  connectionId: string;
  connectionName: string;
  userId: string;
  organizationId: string | null;
}

/** One e-mail of the outbox, before it is addressed. */
export interface MailText {
  kind: NotificationKind;
  subject: string;
  body: string;
  /**
   * `info`: sent to paging channels as a plain message, not a trigger (an SLO burn worth a ticket,
   * not a page). By default an incident's alert triggers.
   */
  event?: "info";
}

interface MailFacts {
  target: IncidentTarget;
  /** The opening or resolving event's detail, as the detector wrote it. */
  detail: Record<string, unknown>;
  at: Date;
  openedAt: Date;
  publicUrl: string;
}

const link = (f: MailFacts) => `${f.publicUrl}/v1/connections/${f.target.connectionId}`;

/** Per kind: the opening e-mail's kind and subject, and one line on the cause after the connection's name. */
const OPENING: Record<
  IncidentKind,
  { kind: NotificationKind; subject: (name: string) => string; cause: (d: Record<string, unknown>) => string }
> = {
  availability: {
    kind: "failure",
    subject: (name) => `[Vigil] ${name} is down`,
    cause: (d) =>
      `failed ${String(d.failures)} consecutive checks.\nLast error: ${String(d.error ?? d.reason ?? "unknown")}`,
  },
  missed_heartbeat: {
    kind: "failure",
    subject: (name) => `[Vigil] ${name} is down`,
    cause: (d) =>
      `sent no heartbeat for ${String(d.silentSeconds)} s (last at ${String(d.lastHeartbeatAt)}).`,
  },
  anomaly: {
    kind: "anomaly",
    subject: (name) => `[Vigil] anomaly on ${name}`,
    cause: (d) => `shows an anomaly: ${String(d.summary ?? "unusual behaviour")}.`,
  },
  slo_burn: {
    kind: "slo_burn",
    subject: (name) => `[Vigil] ${name} is burning its error budget`,
    cause: (d) =>
      `is spending its error budget too fast: ${String(d.summary ?? "burn rate above its alert threshold")}.`,
  },
  budget: {
    kind: "budget_warning",
    subject: (name) => `[Vigil] ${name} is over budget`,
    cause: (d) => `went over its budget: ${String(d.summary ?? "spend above the limit")}.`,
  },
};

/**
 * The default e-mails of each kind. A detector whose text does not fit passes its own
 * `MailText` to openIncident/resolveIncident instead; a new kind needs one OPENING entry.
 */
export function openingMail(kind: IncidentKind, f: MailFacts): MailText {
  const name = f.target.connectionName;
  const t = OPENING[kind];
  return {
    kind: t.kind,
    subject: t.subject(name),
    body: `${name} ${t.cause(f.detail)}\nSince: ${f.at.toISOString()}\n\n${link(f)}\n`,
  };
}

export function recoveryMail(_kind: IncidentKind, f: MailFacts): MailText {
  const name = f.target.connectionName;
  const minutes = Math.max(1, Math.round((f.at.getTime() - f.openedAt.getTime()) / 60_000));
  return {
    kind: "recovery",
    subject: `[Vigil] ${name} has recovered`,
    body: `${name} is available again after about ${minutes} min.\n\n${link(f)}\n`,
  };
}
