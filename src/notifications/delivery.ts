import type { Logger } from "pino";
import type { RelationalStore } from "../stores/relational/types.js";
import type { Mailer } from "./mailer.js";

interface Pending extends Record<string, unknown> {
  id: string;
  recipient: string;
  subject: string;
  body: string;
  attempts: number;
}

/** Wait before retry n (1-based): 30 s, 2 min, 8 min, … capped at 1 h; given up after 10 attempts. */
export const retryDelayMs = (attempt: number) => Math.min(30_000 * 4 ** (attempt - 1), 3_600_000);
export const MAX_ATTEMPTS = 10;
/** A claimed e-mail is this job's for this long; another node sends it only after that. */
const CLAIM_MS = 5 * 60_000;

/**
 * Sends the notifications outbox. Each e-mail is claimed (FOR UPDATE SKIP LOCKED, pushing its
 * next attempt past the claim), sent, then marked sent, so two nodes never send one e-mail at
 * once and a sent one is never sent again. A failure is retried with back-off. A crash between
 * the SMTP server's acceptance and the mark could repeat one e-mail after the claim expires; the
 * Message-ID is the notification id, so a mail system can drop the repeat.
 *
 * Without a mailer (SMTP_URL unset) e-mails stay in the outbox and each is logged once.
 */
export class DeliveryJob {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly db: () => RelationalStore,
    private readonly mailer: Mailer | null,
    private readonly log: Logger,
    private readonly opts: { tickMs?: number; batch?: number } = {},
  ) {}

  start(): void {
    const loop = async () => {
      if (this.stopped) return;
      this.running = this.tick().then(
        () => undefined,
        (err) => this.log.warn({ err: (err as Error).message }, "e-mail delivery tick failed"),
      );
      await this.running;
      if (!this.stopped) this.timer = setTimeout(loop, this.opts.tickMs ?? 2_000);
    };
    void loop();
  }

  /** Sends what is due; returns how many were sent. */
  async tick(): Promise<number> {
    if (!this.mailer) return this.logUnsent();
    const claimed = await this.db().query<Pending>(
      `UPDATE notifications SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
        WHERE id IN (SELECT id FROM notifications WHERE status = 'pending' AND next_attempt_at <= now()
                      ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING id, recipient, subject, body, attempts`,
      [this.opts.batch ?? 20, CLAIM_MS / 1000],
    );
    let sent = 0;
    for (const n of claimed.rows) {
      try {
        await this.mailer.send({ id: n.id, to: n.recipient, subject: n.subject, text: n.body });
        await this.db().query(
          "UPDATE notifications SET status = 'sent', sent_at = now(), last_error = NULL WHERE id = $1",
          [n.id],
        );
        sent++;
      } catch (err) {
        const error = (err as Error).message;
        const giveUp = n.attempts >= MAX_ATTEMPTS;
        await this.db().query(
          `UPDATE notifications SET status = $2, last_error = $3, next_attempt_at = now() + make_interval(secs => $4) WHERE id = $1`,
          [n.id, giveUp ? "failed" : "pending", error, retryDelayMs(n.attempts) / 1000],
        );
        this.log.warn(
          { notification: n.id, attempt: n.attempts, err: error },
          giveUp ? "e-mail given up" : "e-mail failed; will retry",
        );
      }
    }
    return sent;
  }

  private async logUnsent(): Promise<number> {
    const r = await this.db().query<Pending>(
      `UPDATE notifications SET last_error = 'SMTP_URL is not set: kept in the outbox'
        WHERE status = 'pending' AND last_error IS NULL
        RETURNING id, recipient, subject, body, attempts`,
    );
    for (const n of r.rows)
      this.log.info(
        { notification: n.id, to: n.recipient, subject: n.subject },
        "e-mail kept in the outbox (SMTP_URL not set)",
      );
    return 0;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    this.mailer?.close();
  }
}
