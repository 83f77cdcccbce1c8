import nodemailer from "nodemailer";

export interface Mail {
  /** Stable id: the notification's, used as the Message-ID so a receiver can drop a repeat. */
  id: string;
  to: string;
  subject: string;
  text: string;
}

/** Outbound e-mail, behind an interface so tests can use a real local SMTP server. */
export interface Mailer {
  send(mail: Mail): Promise<void>;
  close(): void;
}

export function smtpMailer(smtpUrl: string, from: string): Mailer {
  const transport = nodemailer.createTransport(smtpUrl);
  const domain = from.match(/@([^>\s]+)/)?.[1] ?? "vigil.local";
  return {
    async send(mail) {
      await transport.sendMail({
        from,
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        messageId: `<${mail.id}@${domain}>`,
      });
    },
    close: () => transport.close(),
  };
}
