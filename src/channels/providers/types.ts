import type { z } from "zod";

/**
 * What every notification provider implements (src/channels/providers/<type>.ts): its settings
 * (validated by zod, secrets named), how one alert becomes one HTTP request, and how the
 * provider's answer reads. Pure functions: no I/O, no store, no clock. The delivery job
 * (src/channels/delivery.ts) and the test send (src/channels/channels.ts) do the sending, through
 * the outbound agent, so every URL passes the outbound safety rules.
 */

/** The channel types of `POST /v1/channels`. */
export const CHANNEL_TYPES = [
  "email",
  "webhook",
  "slack",
  "teams",
  "discord",
  "pagerduty",
  "opsgenie",
  "telegram",
  "ntfy",
] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

/** The channel types sent by HTTP through a provider module (email and signed webhooks have their own paths). */
export type ProviderType = Exclude<ChannelType, "email" | "webhook">;

/** Paging providers: they keep an incident of their own that Vigil acknowledges and resolves. */
export const PAGING_TYPES: readonly ChannelType[] = ["pagerduty", "opsgenie"];

/**
 * What a paging provider does with the alert: open (or re-notify) its incident, acknowledge it,
 * resolve it; `info` is a plain message (audits, budget warnings without an incident). Chat
 * providers show every event as a message.
 */
export type AlertEvent = "trigger" | "acknowledge" | "resolve" | "info";

/** One alert as a provider formats it. */
export interface ChannelAlert {
  /** The notification's id: the same on every retry (an idempotency key where the provider has one). */
  id: string;
  /**
   * The notification's kind: `failure`, `recovery`, `anomaly`, `budget_warning`, `slo_burn`,
   * `audit`, `acknowledged`, `escalation`, or `test` (a test send).
   */
  kind: string;
  event: AlertEvent;
  /**
   * How loud: a failure, an escalation or an SLO burn that pages is critical; an anomaly, a budget
   * warning or an SLO burn worth a ticket a warning.
   */
  severity: "critical" | "warning" | "info";
  subject: string;
  body: string;
  connectionId: string | null;
  connectionName: string | null;
  incidentId: string | null;
  /** `availability`, `missed_heartbeat`, `anomaly`, `budget`, `slo_burn`; null without an incident. */
  incidentKind: string | null;
  createdAt: Date;
  /** Absolute links to the dashboard (PUBLIC_URL): the incident's page, the connection's page, the home page. */
  links: { incident: string | null; connection: string | null; dashboard: string };
}

/** The request a provider makes of one alert. */
export interface ProviderRequest {
  url: URL;
  headers: Record<string, string>;
  /** The exact bytes sent (JSON for every provider but ntfy, whose body is the message text). */
  body: string;
}

/** The provider's answer, as read back (the body cut at 16 KB). */
export interface ProviderAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** How an attempt ended, for the outbox row and the timeline. */
export interface ProviderOutcome {
  /** Null: the provider accepted it. Otherwise a short reason naming no secret. */
  error: string | null;
  /** A retry cannot help (a 4xx that is not 408/429): give up now. */
  giveUp?: boolean;
  /** The provider asked to wait (429 `Retry-After`, Telegram's `parameters.retry_after`), in ms. */
  retryAfterMs?: number;
  /**
   * The settings field the provider refused (a bad token, routing key, chat id): a test send
   * answers 400 naming `settings.<field>`.
   */
  refusedField?: string;
}

export interface Provider<S extends Record<string, unknown> = Record<string, unknown>> {
  type: ProviderType;
  /** The `settings` object of POST /v1/channels for this type (zod, strict: unknown fields are refused). */
  settings: z.ZodType<S>;
  /** Settings fields that are secrets: stored encrypted, never answered, kept by PUT when left out. */
  secretFields: readonly (keyof S & string)[];
  /** Settings fields that are URLs Vigil connects to (checked by the outbound rules). */
  urlFields: readonly (keyof S & string)[];
  /** A short hint naming the channel without its secret, e.g. `hooks.slack.com/…x7Qa`, `chat 12345`. */
  hint(settings: S): string;
  /** The request for one alert. Never throws on any alert text: long text is cut to the provider's limits. */
  request(alert: ChannelAlert, settings: S): ProviderRequest;
  /** What the answer means. */
  interpret(answer: ProviderAnswer, settings: S): ProviderOutcome;
}
