import type { Logger } from "pino";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import type { Mailer } from "./mailer.js";
import { recordDelivery } from "../incidents/incidents.js";
import { INVITATION_KIND, invitationMailText, UnsendableInvitation } from "../identity/invitations.js";
import {
  claimDueMail,
  markFailed,
  markSent,
  noteUnsendable,
  type PendingNotification,
} from "./repository.js";
import { deliveries } from "../lib/metrics.js";

/** Wait before retry n (1-based): 30 s, 2 min, 8 min, … capped at 1 h; given up after 10 attempts. */
export const retryDelayMs = (attempt: number) => Math.min(30_000 * 4 ** (attempt - 1), 3_600_000);
export const MAX_ATTEMPTS = 10;
/** A claimed notification is this job's for this long; another node sends it only after that. */
export const CLAIM_MS = 5 * 60_000;

/** How one claimed attempt ended: sent (`error` null), failed (retried), or given up. */
export interface AttemptOutcome {
  /** Null: delivered. Otherwise a short reason; it names no secret and no full webhook URL. */
  error: string | null;
  /** Give up now whatever the attempt count (nothing a retry could change: a deleted webhook). */
  giveUp?: boolean;
  /** The receiver asked to wait this long (429 Retry-After): the retry is no sooner. */
  retryAfterMs?: number;
}

/**
 * Records the outcome of one claimed attempt, on every channel: the notification's mark and the
 * incident's timeline event (`delivered`, `delivery_failed` with its retry time, or
 * `delivery_given_up`) in one transaction. A failure is retried with back-off (`retryDelayMs`)
 * until MAX_ATTEMPTS. Answers whether it was given up.
 */
export async function settleAttempt(
  db: Pick<RelationalStore, "transaction">,
  n: Pick<PendingNotification, "id" | "kind" | "channel" | "recipient" | "attempts" | "incident_id">,
  outcome: AttemptOutcome,
  done: Date,
): Promise<{ giveUp: boolean }> {
  const attempt = {
    notificationId: n.id,
    kind: n.kind,
    channel: n.channel,
    recipient: n.recipient,
    attempt: n.attempts,
    at: done,
  };
  const { error } = outcome;
  if (error === null) {
    // the mark and the incident's `delivered` event in one transaction
    await db.transaction(async (tx: Queryable) => {
      await markSent(tx, n.id, done);
      if (n.incident_id) await recordDelivery(tx, { ...attempt, incidentId: n.incident_id, outcome: "sent" });
    });
    return { giveUp: false };
  }
  const giveUp = outcome.giveUp === true || n.attempts >= MAX_ATTEMPTS;
  const retryAt = new Date(done.getTime() + Math.max(retryDelayMs(n.attempts), outcome.retryAfterMs ?? 0));
  await db.transaction(async (tx: Queryable) => {
    await markFailed(tx, { id: n.id, giveUp, error, retryAt });
    if (n.incident_id)
      await recordDelivery(tx, {
        ...attempt,
        incidentId: n.incident_id,
        outcome: giveUp ? "given_up" : "failed",
        error,
        ...(giveUp ? {} : { retryAt }),
      });
  });
  return { giveUp };
}

/**
 * Outcomes whose mark could not be written (the relational store was unreachable just after the
 * SMTP server or the receiver accepted), kept in memory and written before anything new is
 * claimed: without this, an e-mail accepted while PostgreSQL stops stays `pending` and goes out
 * again once its claim runs out. Bounded: a delivery job claims nothing while marks are owed, and
 * an outcome is kept only while its claim holds (CLAIM_MS); after that another node may send the
 * notification again anyway, so it is dropped with an error in the log.
 */
export class OwedMarks {
  private readonly owed: {
    n: Parameters<typeof settleAttempt>[1];
    outcome: AttemptOutcome;
    done: Date;
  }[] = [];

  get size(): number {
    return this.owed.length;
  }

  /** Settles one attempt; when the store refuses, owes it (and answers as if not given up). */
  async settle(
    db: Pick<RelationalStore, "transaction">,
    n: Parameters<typeof settleAttempt>[1],
    outcome: AttemptOutcome,
    done: Date,
    log: Logger,
  ): Promise<{ giveUp: boolean }> {
    deliveries
      .labels(
        n.channel,
        outcome.error === null
          ? "delivered"
          : outcome.giveUp === true || n.attempts >= MAX_ATTEMPTS
            ? "given_up"
            : "retry",
      )
      .inc();
    try {
      return await settleAttempt(db, n, outcome, done);
    } catch (err) {
      this.owed.push({ n, outcome, done });
      log.warn(
        { notification: n.id, err: (err as Error).message },
        "the outcome of a delivery could not be recorded; kept to record when the store answers",
      );
      return { giveUp: false };
    }
  }

  /**
   * Writes what is owed, oldest first; rejects (so the caller claims nothing new) while the store
   * still refuses. `now` drops outcomes whose claim has run out.
   */
  async flush(db: Pick<RelationalStore, "transaction">, now: Date, log: Logger): Promise<void> {
    while (this.owed.length > 0) {
      const o = this.owed[0] as (typeof this.owed)[number];
      if (now.getTime() - o.done.getTime() > CLAIM_MS) {
        log.error(
          { notification: o.n.id, sent: o.outcome.error === null },
          "the outcome of a delivery could not be recorded before its claim ran out; it may be sent again",
        );
        this.owed.shift();
        continue;
      }
      await settleAttempt(db, o.n, o.outcome, o.done);
      this.owed.shift();
    }
  }
}

/**
 * Sends the e-mails of the notifications outbox. Each e-mail is claimed (FOR UPDATE SKIP LOCKED,
 * pushing its next attempt past the claim), sent, then marked sent, so two nodes never send one
 * e-mail at once and a sent one is never sent again. A failure is retried with back-off. Each
 * attempt's outcome of an incident's e-mail (sent, failed with its error, given up) is appended to
 * the incident's timeline in the transaction that marks the e-mail (`settleAttempt`). A crash
 * between the SMTP server's acceptance and the mark could repeat one e-mail after the claim
 * expires; the Message-ID is the notification id, so a mail system can drop the repeat. A mark
 * the store refuses while the process lives (PostgreSQL stopping just after the SMTP server
 * accepted) is owed and written first on a later tick (`OwedMarks`), so an outage does not.
 * Webhooks have their own job (src/webhooks/delivery.ts) with the same semantics.
 *
 * Without a mailer (SMTP_URL unset) e-mails stay in the outbox and each is logged once.
 */
export class DeliveryJob {
  private readonly now: () => Date;
  private readonly owed = new OwedMarks();

  constructor(
    private readonly db: () => RelationalStore,
    private readonly mailer: Mailer | null,
    private readonly log: Logger,
    private readonly opts: { batch?: number; now?: () => Date } = {},
  ) {
    this.now = opts.now ?? (() => new Date());
  }

  /** Sends what is due; returns how many were sent. The jobs role runs it every 2 s (jobs/jobs.ts). */
  async tick(): Promise<number> {
    if (!this.mailer) return this.logUnsent();
    await this.owed.flush(this.db(), this.now(), this.log);
    const at = this.now();
    const claimed = await claimDueMail(this.db(), {
      batch: this.opts.batch ?? 20,
      at,
      claimUntil: new Date(at.getTime() + CLAIM_MS),
    });
    let sent = 0;
    for (const n of claimed) {
      let error: string | null = null;
      let unsendable = false;
      try {
        // an invitation's link is made as it is sent: the outbox never holds it (identity/invitations.ts)
        const text = n.kind === INVITATION_KIND ? await invitationMailText(this.db(), n, this.now()) : n.body;
        await this.mailer.send({ id: n.id, to: n.recipient, subject: n.subject, text });
      } catch (err) {
        error = (err as Error).message;
        unsendable = err instanceof UnsendableInvitation;
      }
      const { giveUp } = await this.owed.settle(
        this.db(),
        n,
        { error, giveUp: unsendable },
        this.now(),
        this.log,
      );
      if (error === null) {
        sent++;
        continue;
      }
      this.log.warn(
        { notification: n.id, attempt: n.attempts, err: error },
        giveUp ? "e-mail given up" : "e-mail failed; will retry",
      );
    }
    return sent;
  }

  private async logUnsent(): Promise<number> {
    for (const n of await noteUnsendable(this.db(), "SMTP_URL is not set: kept in the outbox"))
      this.log.info(
        { notification: n.id, to: n.recipient, subject: n.subject },
        "e-mail kept in the outbox (SMTP_URL not set)",
      );
    return 0;
  }

  /** Closes the mailer; the runner has stopped calling `tick` by then. */
  stop(): void {
    this.mailer?.close();
  }
}
