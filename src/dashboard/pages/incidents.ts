import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import type { Actor } from "../../core/actor.js";
import type { AppContext } from "../../core/context.js";
import { invalidInput, notFound, ServiceError } from "../../core/errors.js";
import { issueMessage } from "../../core/issues.js";
import { listAnomalies } from "../../anomalies/list.js";
import { keysetPage, windowOf } from "../../http/routes/incidents.js";
import { alertsQuery, anomaliesQuery, incidentParams, incidentsQuery } from "../../http/read-queries.js";
import { getOrganization } from "../../identity/organizations.js";
import { ACK_NOTE_MAX, acknowledge } from "../../incidents/acknowledge.js";
import { INCIDENT_KINDS, INCIDENT_STATUSES } from "../../incidents/incidents.js";
import { getIncident, type Incident, listIncidents } from "../../incidents/list.js";
import { listAlerts, NOTIFICATION_KINDS } from "../../notifications/alerts.js";
import { type SpendConnection, spendConnectionChoices } from "../../usage/account-spend.js";
import { fieldErrors, type FormErrors, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * Incidents, anomalies and the alert history (issue #15, point 5). Every page reads through the
 * functions REST's `GET /v1/incidents`, `/v1/anomalies` and `/v1/alerts` use, with the same
 * query schemas (so a bad filter says what the API says) and the same signed keyset cursors (a
 * "Next" link carries the API's `next_cursor`; a forged or foreign one is the API's 400). The
 * Acknowledge button runs the core's `acknowledge` with the signed-in user as the actor.
 *
 * An incident, or a connection filter, of another tenant is answered as a plain 404 page: the
 * core's 403 ("No access to …") would tell a stranger the id exists.
 */

const PAGE_SIZE = 50;

type Q = Record<string, unknown>;

/**
 * The page's query through the REST schema: empty form fields dropped, only the schema's own
 * parameters read (a page's `notice` is not the API's), the page size fixed. A bad value is the
 * API's 400 message for the parameter, naming it as the form does.
 */
function parseQuery<S extends z.ZodType>(schema: S, raw: Q, keys: readonly string[]): z.output<S> {
  const input: Record<string, unknown> = {};
  for (const k of keys) {
    const v = raw[k];
    if (v === undefined || v === "") continue;
    input[k] = v;
  }
  input.limit = String(PAGE_SIZE);
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  if (!issue) throw invalidInput("query", "is invalid");
  const field = ["query", ...issue.path.map(String)].join(".");
  throw new ServiceError("invalid_input", `${field}: ${issueMessage(input, issue, { query: true })}`, {
    field,
  });
}

/** The filters as the form shows them back (strings, bounded). */
function echo(raw: Q, keys: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) {
    const v = raw[k];
    out[k] = typeof v === "string" ? v.slice(0, 200) : "";
  }
  return out;
}

/** Another tenant's incident or connection: the plain 404 page, never the core's 403. */
function hideForeign(err: unknown, message: string): never {
  if (err instanceof ServiceError && err.code === "forbidden") throw notFound(message);
  throw err;
}

/** "2 h 5 min", "45 s", "3 d 4 h": the two largest units. */
export function durationWords(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const units: [number, string][] = [
    [86_400, "d"],
    [3_600, "h"],
    [60, "min"],
    [1, "s"],
  ];
  const parts: string[] = [];
  let rest = s;
  for (const [size, name] of units) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0 || parts.length > 0) parts.push(`${n} ${name}`);
    if (parts.length === 2) break;
  }
  return parts.filter((p) => !p.startsWith("0 ")).join(" ") || "0 s";
}

const KIND_WORDS: Record<string, string> = {
  availability: "availability",
  missed_heartbeat: "missed heartbeat",
  anomaly: "anomaly",
  budget: "budget",
  slo_burn: "SLO burn rate",
};

const MAIL_WORDS: Record<string, string> = {
  failure: "failure",
  recovery: "recovery",
  audit: "audit",
  budget_warning: "budget warning",
  anomaly: "anomaly",
  acknowledged: "acknowledgement",
  escalation: "escalation",
  slo_burn: "SLO burn rate",
};

/** How the timeline names a delivery's channel type. */
const CHANNEL_WORDS: Record<string, string> = {
  email: "e-mail",
  webhook: "webhook",
  slack: "Slack message",
  teams: "Teams card",
  discord: "Discord message",
  pagerduty: "PagerDuty event",
  opsgenie: "Opsgenie alert",
  telegram: "Telegram message",
  ntfy: "ntfy message",
};

const AUDIT_WORDS: Record<string, string> = {
  api_key_created: "API key created",
  api_key_revoked: "API key revoked",
  connection_credentials_changed: "connection credentials changed",
  connection_deleted: "connection deleted",
  membership_changed: "membership changed",
};

/** Who did it (a timeline's `by`), as a person reads it: an e-mail address where the user may know it. */
type People = (userId: string) => string;

async function peopleOf(
  ctx: AppContext,
  req: FastifyRequest,
  actor: Actor,
  organizationIds: Iterable<string>,
): Promise<People> {
  const known = new Map<string, string>();
  const me = req.dashboardUser;
  if (me) known.set(me.actor.userId, me.email);
  for (const orgId of new Set(organizationIds)) {
    // the members of an organization the user belongs to (others' e-mails are not the user's to see)
    const org = await getOrganization(ctx, actor, orgId).catch(() => null);
    for (const m of org?.members ?? []) known.set(m.userId, m.email);
  }
  return (userId) => known.get(userId) ?? "a user who is no longer a member";
}

interface By {
  type?: string;
  user_id?: string;
  key_id?: string;
  via?: string;
  job?: string;
}

function byWords(by: By | undefined, people: People): string {
  if (!by || typeof by !== "object") return "someone";
  if (by.type === "system") return `Vigil (${by.job ?? "a job"})`;
  const who = by.user_id ? people(by.user_id) : "someone";
  if (by.type === "api_key") return `${who} with an API key`;
  if (by.type === "user" && by.via === "oauth") return `${who} through the MCP tool server`;
  return who;
}

const str = (v: unknown) => (typeof v === "string" ? v : typeof v === "number" ? String(v) : null);

/** One timeline event in words: a heading, a sentence, and times the template shows as <time>. */
interface TimelineEntry {
  at: string;
  kind: string;
  title: string;
  text: string;
  times: { label: string; iso: string }[];
  note: string | null;
}

function timelineEntry(e: Incident["events"][number], people: People): TimelineEntry {
  const d = (e.detail && typeof e.detail === "object" ? e.detail : {}) as Record<string, unknown>;
  const mail = MAIL_WORDS[str(d.kind) ?? ""] ?? str(d.kind) ?? "";
  const channel = CHANNEL_WORDS[str(d.channel) ?? "email"] ?? "e-mail";
  const times: TimelineEntry["times"] = [];
  let title: string = e.kind;
  let text: string;
  let note: string | null = null;
  switch (e.kind) {
    case "opened": {
      title = "Opened";
      const facts: string[] = [];
      if (d.failures !== undefined) facts.push(`${str(d.failures)} consecutive failed checks`);
      if (d.silentSeconds !== undefined)
        facts.push(`no heartbeat for ${durationWords(Number(d.silentSeconds) * 1000)}`);
      if (str(d.reason)) facts.push(`reason: ${str(d.reason)}`);
      if (str(d.error)) facts.push(`error: ${str(d.error)}`);
      if (str(d.metric)) facts.push(`metric: ${str(d.metric)}`);
      if (d.source === "heartbeat") facts.push("reported by the gateway's heartbeat");
      text = facts.length ? `${facts.join("; ")}.` : "The detector opened it.";
      if (str(d.lastHeartbeatAt))
        times.push({ label: "last heartbeat", iso: str(d.lastHeartbeatAt) as string });
      break;
    }
    case "notified": {
      title = "Notified";
      const n = Number(d.recipients ?? 0);
      const w = Number(d.webhooks ?? 0);
      const c = Array.isArray(d.channel_ids) ? d.channel_ids.length : 0;
      const to = [
        n ? `${n} e-mail ${n === 1 ? "recipient" : "recipients"}` : null,
        w ? `${w} ${w === 1 ? "webhook" : "webhooks"}` : null,
        c ? `${c} ${c === 1 ? "channel" : "channels"}` : null,
      ].filter(Boolean);
      text = `A ${mail} alert was decided for ${to.length ? to.join(" and ") : "nobody (no recipient)"}`;
      if (str(d.deferred_until)) {
        text += `; held back (${str(d.reason) ?? "noise control"})`;
        times.push({ label: "due", iso: str(d.deferred_until) as string });
      }
      text += ".";
      break;
    }
    case "delivered":
      title = "Delivered";
      text = `The ${mail} ${channel} reached ${str(d.recipient) ?? "its recipient"} (attempt ${str(d.attempt) ?? "?"}).`;
      break;
    case "delivery_failed":
      title = "Delivery failed";
      text = `The ${mail} ${channel} to ${str(d.recipient) ?? "its recipient"} failed (attempt ${str(d.attempt) ?? "?"})${str(d.error) ? `: ${str(d.error)}` : ""}; it will be retried.`;
      if (str(d.retry_at)) times.push({ label: "retry", iso: str(d.retry_at) as string });
      break;
    case "delivery_given_up":
      title = "Delivery given up";
      text = `The ${mail} ${channel} to ${str(d.recipient) ?? "its recipient"} was given up after attempt ${str(d.attempt) ?? "?"}${str(d.error) ? `: ${str(d.error)}` : ""}.`;
      break;
    case "acknowledged":
      title = "Acknowledged";
      text = `Acknowledged by ${byWords(d.by as By | undefined, people)}.`;
      note = str(d.note);
      break;
    case "resolved":
      title = "Resolved";
      text = `${d.automatic === false ? "Resolved by a person" : "Resolved automatically"}${str(d.reason) ? `: ${str(d.reason)}` : ""}.`;
      break;
    case "escalated": {
      title = d.reminder === true ? "Reminder" : "Escalated";
      const c = Array.isArray(d.channel_ids) ? d.channel_ids.length : 0;
      text = `Unacknowledged for ${str(d.unacknowledged_minutes) ?? "?"} min: sent to ${c} escalation ${c === 1 ? "channel" : "channels"} (step ${str(d.step) ?? "?"}).`;
      break;
    }
    case "suppressed":
      title = "Withheld";
      text = `The ${mail} alert was withheld${str(d.reason) ? `: ${str(d.reason)}` : ""}.`;
      break;
    default:
      text = JSON.stringify(d).slice(0, 500);
  }
  return { at: e.at, kind: e.kind, title, text, times, note };
}

/** An incident as a row or a page shows it. */
function incidentView(i: Incident, connections: Map<string, SpendConnection>, people: People, now: Date) {
  const ack = [...i.events].reverse().find((e) => e.kind === "acknowledged");
  const ackDetail = (ack?.detail ?? {}) as { by?: By; note?: string | null };
  const end = i.resolved_at ? Date.parse(i.resolved_at) : now.getTime();
  return {
    ...i,
    kindWords: KIND_WORDS[i.kind] ?? i.kind,
    connection: connections.get(i.connection_id) ?? null,
    acknowledgedBy: ack ? byWords(ackDetail.by, people) : null,
    note: ack ? (ackDetail.note ?? null) : null,
    duration: durationWords(end - Date.parse(i.opened_at)),
    ongoing: !i.resolved_at,
  };
}

const organizationsIn = (conns: Iterable<SpendConnection | undefined>) =>
  [...conns].flatMap((c) => (c?.organization ? [c.organization.id] : []));

/** A link to this page with these filters and a cursor. */
function hrefWith(path: string, filters: Record<string, string>, cursor: string | null): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (v && k !== "cursor") p.set(k, v);
  if (cursor) p.set("cursor", cursor);
  const s = p.toString();
  return s ? `${path}?${s}` : path;
}

/**
 * A list page's query: the REST schema's, the page of rows, and its errors. A bad filter or
 * cursor re-renders the filters with the API's message and a 400; a connection the user cannot
 * see is a 404 page.
 */
async function listing<S extends z.ZodType, R>(
  raw: Q,
  schema: S,
  keys: readonly string[],
  run: (q: z.output<S>) => Promise<{ data: R[]; pagination: { next_cursor: string | null } }>,
  opts: { shown?: readonly string[]; prepare?: (raw: Q) => Q } = {},
) {
  const filters = echo(raw, opts.shown ?? keys);
  let rows: R[] = [];
  let next: string | null = null;
  let errors: FormErrors = { fields: {}, form: null };
  let status = 200;
  try {
    const q = parseQuery(schema, opts.prepare ? opts.prepare(raw) : raw, keys);
    const r = await run(q).catch((err: unknown) =>
      hideForeign(err, `Connection ${String((q as { connection_id?: string }).connection_id)} not found`),
    );
    rows = r.data;
    next = r.pagination.next_cursor;
  } catch (err) {
    if (!(err instanceof ServiceError) || err.code !== "invalid_input") throw err;
    errors = fieldErrors(err);
    // a refused cursor is the page's error, not a field's
    if (errors.fields.cursor) errors = { fields: {}, form: err.message };
    status = statusOfError(err);
  }
  return { filters, rows, next, errors, status };
}

const NOTICES: Record<string, string> = {
  acknowledged: "The incident is acknowledged: everyone who looks sees that someone is on it.",
  already: "The incident was already acknowledged; nothing changed.",
};

export async function registerIncidentPages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const choices = (actor: Actor) => spendConnectionChoices(ctx, actor);
  const byId = (list: SpendConnection[]) => new Map(list.map((c) => [c.id, c]));

  scope.get("/incidents", async (req, reply) => {
    const actor = dashboardActor(req);
    const keys = ["status", "kind", "connection_id", "cursor"] as const;
    const connections = await choices(actor);
    const list = await listing(req.query as Q, incidentsQuery, keys, (q) => {
      const bound = {
        endpoint: "incidents",
        ...(q.status !== undefined ? { status: q.status } : {}),
        ...(q.kind !== undefined ? { kind: q.kind } : {}),
      };
      return keysetPage(ctx, actor, q, bound, (after) =>
        listIncidents(ctx, actor, {
          ...windowOf(q),
          status: q.status,
          kind: q.kind,
          limit: PAGE_SIZE,
          after,
        }),
      );
    });
    const conns = byId(connections);
    const people = await peopleOf(
      ctx,
      req,
      actor,
      organizationsIn(list.rows.map((i) => conns.get(i.connection_id))),
    );
    const now = ctx.now();
    return page(
      reply,
      "incidents/list",
      {
        frame: frameOf(req, reply),
        ...list,
        incidents: list.rows.map((i) => incidentView(i, conns, people, now)),
        connections,
        statuses: INCIDENT_STATUSES,
        kinds: INCIDENT_KINDS.map((k) => [k, KIND_WORDS[k] ?? k]),
        nextHref: list.next ? hrefWith("/incidents", list.filters, list.next) : null,
        firstHref: list.filters.cursor ? hrefWith("/incidents", list.filters, null) : null,
        filtered: !!(list.filters.status || list.filters.kind || list.filters.connection_id),
      },
      list.status,
    );
  });

  const detailPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    id: string,
    form: { note: string; errors: FormErrors | null },
    status = 200,
  ) => {
    const actor = dashboardActor(req);
    const incident = await getIncident(ctx, actor, id).catch((err: unknown) =>
      hideForeign(err, `Incident ${id} not found`),
    );
    const connections = byId(await choices(actor));
    const people = await peopleOf(
      ctx,
      req,
      actor,
      organizationsIn([connections.get(incident.connection_id)]),
    );
    const notice = form.errors ? null : (NOTICES[String((req.query as Q).notice ?? "")] ?? null);
    return page(
      reply,
      "incidents/detail",
      {
        frame: frameOf(req, reply, notice),
        incident: incidentView(incident, connections, people, ctx.now()),
        timeline: incident.events.map((e) => timelineEntry(e, people)),
        note: form.note,
        errors: form.errors ?? { fields: {}, form: null },
        noteMax: ACK_NOTE_MAX,
      },
      status,
    );
  };

  const incidentId = (raw: unknown) => {
    const r = incidentParams.safeParse(raw);
    if (r.success) return r.data.id;
    const issue = r.error.issues[0];
    throw invalidInput("id", issue?.message ?? "must be an incident id (a UUID)");
  };

  scope.get<{ Params: { id: string } }>("/incidents/:id", async (req, reply) =>
    detailPage(req, reply, incidentId(req.params), { note: "", errors: null }),
  );

  scope.post<{ Params: { id: string } }>(
    "/incidents/:id/acknowledge",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const id = incidentId(req.params);
      const actor = dashboardActor(req);
      const f = formOf(req);
      const note = (f.note ?? "").trim();
      const before = await getIncident(ctx, actor, id).catch((err: unknown) =>
        hideForeign(err, `Incident ${id} not found`),
      );
      try {
        await acknowledge(ctx, actor, { incidentId: id, note: note || null });
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        if (err.code === "forbidden" || err.code === "not_found")
          hideForeign(err, `Incident ${id} not found`);
        return detailPage(req, reply, id, { note, errors: fieldErrors(err) }, statusOfError(err));
      }
      const done = before.status === "open" ? "acknowledged" : "already";
      return reply
        .code(303)
        .header("location", `/incidents/${encodeURIComponent(id)}?notice=${done}`)
        .send();
    },
  );

  scope.get("/anomalies", async (req, reply) => {
    const actor = dashboardActor(req);
    const keys = ["status", "connection_id", "cursor"] as const;
    const connections = await choices(actor);
    const list = await listing(req.query as Q, anomaliesQuery, keys, (q) => {
      const bound = { endpoint: "anomalies", ...(q.status !== undefined ? { status: q.status } : {}) };
      return keysetPage(ctx, actor, q, bound, (after) =>
        listAnomalies(ctx, actor, { ...windowOf(q), status: q.status, limit: PAGE_SIZE, after }),
      );
    });
    const conns = byId(connections);
    return page(
      reply,
      "anomalies/list",
      {
        frame: frameOf(req, reply),
        ...list,
        anomalies: list.rows.map((a) => ({ ...a, connection: conns.get(a.connection_id) ?? null })),
        connections,
        value: metricValue,
        metricWords: (m: string) => METRIC_WORDS[m] ?? m,
        detector: ctx.config.anomalies,
        nextHref: list.next ? hrefWith("/anomalies", list.filters, list.next) : null,
        firstHref: list.filters.cursor ? hrefWith("/anomalies", list.filters, null) : null,
        filtered: !!(list.filters.status || list.filters.connection_id),
      },
      list.status,
    );
  });

  scope.get("/alerts", async (req, reply) => {
    const actor = dashboardActor(req);
    const keys = ["kind", "connection_id", "cursor", "since", "until"] as const;
    const connections = await choices(actor);
    const list = await listing(
      req.query as Q,
      alertsQuery,
      keys,
      (q) => {
        const bound = { endpoint: "alerts", ...(q.kind !== undefined ? { kind: q.kind } : {}) };
        return keysetPage(ctx, actor, q, bound, (after) =>
          listAlerts(ctx, actor, { ...windowOf(q), kind: q.kind, limit: PAGE_SIZE, after }),
        );
      },
      { shown: ["kind", "connection_id", "cursor", "from", "to"], prepare: daysToWindow },
    );
    return page(
      reply,
      "alerts/list",
      {
        frame: frameOf(req, reply),
        ...list,
        alerts: list.rows.map((a) => ({
          ...a,
          kindWords:
            a.kind === "audit" && a.audit_event
              ? `audit: ${AUDIT_WORDS[a.audit_event] ?? a.audit_event}`
              : (MAIL_WORDS[a.kind] ?? a.kind),
        })),
        connections,
        kinds: NOTIFICATION_KINDS.map((k) => [k, MAIL_WORDS[k] ?? k]),
        nextHref: list.next ? hrefWith("/alerts", list.filters, list.next) : null,
        firstHref: list.filters.cursor ? hrefWith("/alerts", list.filters, null) : null,
        filtered: !!(list.filters.kind || list.filters.connection_id || list.filters.from || list.filters.to),
      },
      list.status,
    );
  });
}

/**
 * The alert history's From and To (whole UTC days, both included) as the API's window: `since`
 * the start of From, `until` the start of the day after To.
 */
function daysToWindow(raw: Q): Q {
  const day = (name: "from" | "to") => {
    const v = raw[name];
    if (v === undefined || v === "") return undefined;
    const ms = typeof v === "string" && /^\d{4}-\d{2}-\d{2}$/.test(v) ? Date.parse(`${v}T00:00:00Z`) : NaN;
    if (!Number.isFinite(ms)) throw invalidInput(`query.${name}`, "must be a date (YYYY-MM-DD)");
    return ms;
  };
  const from = day("from");
  const to = day("to");
  if (from !== undefined && to !== undefined && from > to)
    throw invalidInput("query.from", "must not be after To");
  return {
    ...raw,
    since: from === undefined ? undefined : new Date(from).toISOString(),
    until: to === undefined ? undefined : new Date(to + 86_400_000).toISOString(),
  };
}

const METRIC_WORDS: Record<string, string> = {
  response_time: "response time (p95)",
  failure_rate: "failed checks",
  execution_failure_rate: "failed executions",
  gateway_latency: "gateway latency (p95)",
  token_volume: "tokens",
  token_spend: "token spend",
};

/** A metric's value with its unit. */
export function metricValue(metric: string, v: number | null): string {
  if (v === null || !Number.isFinite(v)) return "–";
  switch (metric) {
    case "response_time":
    case "gateway_latency":
      return `${Math.round(v).toLocaleString("en-US")} ms`;
    case "failure_rate":
    case "execution_failure_rate":
      return `${(v * 100).toLocaleString("en-US", { maximumFractionDigits: 1 })} %`;
    case "token_volume":
      return `${Math.round(v).toLocaleString("en-US")} tokens`;
    case "token_spend":
      return `$${v.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
    default:
      return v.toLocaleString("en-US", { maximumFractionDigits: 3 });
  }
}
