import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { SMTPServer } from "smtp-server";
import { createLogger } from "../../src/lib/logger.js";
import { DeliveryJob } from "../../src/notifications/delivery.js";
import { smtpMailer } from "../../src/notifications/mailer.js";
import { freshRelational } from "../helpers/backends.js";

interface Received {
  to: string[];
  data: string;
}

/** A real SMTP server on loopback that records what it accepts, and can refuse on demand. */
async function smtp(t: Test) {
  const received: Received[] = [];
  const control = { refuse: false };
  const server = new SMTPServer({
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, session, callback) {
      let data = "";
      stream.on("data", (c: Buffer) => {
        data += c.toString();
      });
      stream.on("end", () => {
        if (control.refuse)
          return callback(Object.assign(new Error("try again later"), { responseCode: 451 }));
        received.push({ to: session.envelope.rcptTo.map((r) => r.address), data });
        callback();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.server.address() as AddressInfo).port;
  return { url: `smtp://127.0.0.1:${port}`, received, control };
}

async function insertNotification(
  db: Awaited<ReturnType<typeof freshRelational>>,
  recipient: string,
  subject: string,
) {
  const id = randomUUID();
  await db.query(
    `INSERT INTO notifications (id, kind, recipient, subject, body, created_at, next_attempt_at)
     VALUES ($1, 'failure', $2, $3, 'body text', now(), now())`,
    [id, recipient, subject],
  );
  return id;
}

t.test("the outbox goes out over SMTP once; failures are retried", async (t) => {
  const server = await smtp(t);
  const db = await freshRelational(t, "pglite");
  const job = new DeliveryJob(
    () => db,
    smtpMailer(server.url, "Vigil <alerts@vigil.example>"),
    createLogger("silent"),
  );
  t.teardown(() => job.stop());

  const id = await insertNotification(db, "alice@a.example", "[Vigil] n8n is down");
  t.equal(await job.tick(), 1);
  t.equal(server.received.length, 1);
  t.same(server.received[0]?.to, ["alice@a.example"]);
  t.match(server.received[0]?.data, /Subject: \[Vigil\] n8n is down/);
  t.match(server.received[0]?.data, new RegExp(`Message-ID: <${id}@vigil\\.example>`, "i"));
  t.equal(await job.tick(), 0, "nothing left to send");
  t.equal(server.received.length, 1, "never sent twice");
  const row = await db.query<{ status: string; attempts: number }>(
    "SELECT status, attempts FROM notifications WHERE id = $1",
    [id],
  );
  t.same(row.rows[0], { status: "sent", attempts: 1 });

  server.control.refuse = true;
  const retry = await insertNotification(db, "bob@b.example", "[Vigil] recovered");
  t.equal(await job.tick(), 0);
  const failed = await db.query<{ status: string; attempts: number; last_error: string; wait: number }>(
    "SELECT status, attempts, last_error, extract(epoch FROM next_attempt_at - now()) AS wait FROM notifications WHERE id = $1",
    [retry],
  );
  t.match(failed.rows[0], { status: "pending", attempts: 1, last_error: /451|try again/ });
  t.ok(Number(failed.rows[0]?.wait) > 20, "retried after a back-off, not at once");
  server.control.refuse = false;
  await db.query("UPDATE notifications SET next_attempt_at = now() WHERE id = $1", [retry]);
  t.equal(await job.tick(), 1, "sent on retry");
  t.equal(server.received.filter((m) => m.to.includes("bob@b.example")).length, 1);
});

t.test("without SMTP_URL e-mails stay in the outbox and are logged once", async (t) => {
  const db = await freshRelational(t, "pglite");
  let logged = "";
  const log = createLogger("info", {
    write: (s: string) => ((logged += s), true),
  } as unknown as NodeJS.WritableStream);
  const job = new DeliveryJob(() => db, null, log);
  await insertNotification(db, "carol@c.example", "[Vigil] x is down");
  await job.tick();
  await job.tick();
  t.equal(logged.match(/kept in the outbox/g)?.length, 1, "logged once");
  const row = await db.query<{ status: string }>("SELECT status FROM notifications");
  t.equal(row.rows[0]?.status, "pending", "still in the outbox");
});
