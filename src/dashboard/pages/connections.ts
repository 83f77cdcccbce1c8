import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import type { Actor } from "../../core/actor.js";
import { type AppContext, perApp } from "../../core/context.js";
import { invalidInput, notFound, ServiceError } from "../../core/errors.js";
import { issueMessage } from "../../core/issues.js";
import { listAnomalies } from "../../anomalies/list.js";
import {
  type AvailabilityTimeline,
  availabilityTimeline,
  latestChecks,
  TIMELINE_RANGES,
  type TimelineRange,
  type UptimeBar,
  type UptimeCell,
  uptimeBars,
} from "../../availability/uptime-bars.js";
import { getConnectionBudget } from "../../budgets/budgets.js";
import { createConnection } from "../../connections/create.js";
import { getConnectionDetails } from "../../connections/details.js";
import { listConnections } from "../../connections/list.js";
import { deleteConnection } from "../../connections/remove.js";
import type { ListedConnection } from "../../connections/repository.js";
import {
  CONNECTION_STATUSES,
  connectionParams,
  createConnectionBody,
  listConnectionsQuery,
  SERVICE_TYPES,
  type ServiceType,
  updateConnectionBody,
} from "../../connections/schema.js";
import { updateConnection } from "../../connections/update.js";
import { listExecutions } from "../../executions/list.js";
import { listMyOrganizations } from "../../identity/organizations.js";
import { listIncidents } from "../../incidents/list.js";
import { type Burndown, type BurndownPoint, sloBurndown } from "../../slo/burndown.js";
import { validateSloBody, WINDOW_DAYS } from "../../slo/schema.js";
import { BURN_WINDOWS, getSlo, putSlo, removeSlo, type SloStatus } from "../../slo/slo.js";
import { gatewayUsage } from "../../usage/gateway-usage.js";
import { fieldErrors, type FormErrors, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * Connections (issue #15, point 4): the list with each connection's status, latest check and a
 * 90-day uptime bar; add, edit and delete forms; a connection's page with its response-time chart,
 * availability timeline, its service level objective (error budget, burn rates, a burn-down chart
 * and a form to set or remove it), incidents, executions, gateway spend, budget and anomalies.
 *
 * Every read and write is a core function REST uses (listConnections, createConnection,
 * updateConnection, deleteConnection, the read API's queries) with the signed-in user as the actor,
 * and every form goes through the REST body schema first, so a bad field gets the API's message.
 * Credentials are write-only: the edit form never carries them, and an empty credential field keeps
 * the stored one. Another tenant's connection is a plain 404 page (the core's 403 would tell a
 * stranger the id exists); a member deleting an organization's connection gets the core's 403.
 *
 * Page weight (issue point 7): the list pages 50 connections at a time and builds each uptime bar
 * (90 cells of `<i class title>`) in code, not in the template; `npm run bench -- dashboard`
 * measures it at 1,000 connections.
 */

export const PAGE_SIZE = 50;
const BAR_DAYS = 90;

type Q = Record<string, unknown>;

/** `?notice=` values these pages show after a redirect. */
const NOTICES: Record<string, string> = {
  created: "The connection was created. Its first check runs within seconds.",
  updated: "The connection was updated.",
  deleted: "The connection was deleted.",
  slo_set: "The service level objective was saved.",
  slo_removed: "The service level objective was removed.",
};

export const KIND_WORDS: Record<ServiceType, string> = {
  workflow_a: "Workflow automation, self-hosted (workflow_a)",
  workflow_b: "Workflow automation, hosted (workflow_b)",
  gateway: "AI gateway (gateway)",
};
const KIND_SHORT: Record<string, string> = {
  workflow_a: "workflow_a",
  workflow_b: "workflow_b",
  gateway: "gateway",
};

/** 1234567 → "1,234,567" (toLocaleString is slow across thousands of cells). */
const int = (n: number) => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
/** A percent with at most 2 decimals: 99.95, 100, 0. */
const pct = (up: number, checks: number) => String(Math.floor((up / checks) * 10_000) / 100);
const isoDay = (d: Date) => d.toISOString().slice(0, 10);

/**
 * Colour class of a cell by its uptime: >= 99.9 ok, >= 99 warn, below bad, only checks under
 * maintenance (docs/maintenance.md) maintenance blue, no data grey (none).
 */
function cellClass(c: { checks: number; available: number; maintenance: number }): string {
  if (c.checks === 0) return c.maintenance > 0 ? "m" : "";
  const p = (c.available / c.checks) * 100;
  return p >= 99.9 ? "o" : p >= 99 ? "w" : "b";
}

/**
 * An uptime bar as HTML, built here (every value a number or a date, nothing to escape): one
 * `<i>` per cell with its colour class and a text tooltip, in a container with an accessible name
 * summarising it. `label` names the span ("90-day uptime").
 */
export function barHtml(
  cells: readonly UptimeCell[],
  label: string,
  cellTitle: (c: UptimeCell) => string,
  totals: { checks: number; available: number },
): string {
  const summary = totals.checks
    ? `${label} ${pct(totals.available, totals.checks)}%`
    : `${label}: no checks yet`;
  let html = `<div class="uptime ub" role="img" aria-label="${summary}">`;
  for (const c of cells) {
    const k = cellClass(c);
    html += `<i${k ? ` class=${k}` : ""} title="${cellTitle(c)}"></i>`;
  }
  return `${html}</div>`;
}

/**
 * A list cell's tooltip, short (90 of them a row, 4,500 a page): `2026-11-20: 99.86% (1,438/1,440)`,
 * the available and all checks of the day. The connection page's 90-day view says it in words.
 */
const dayTitle = (c: UptimeCell) =>
  c.checks
    ? `${isoDay(c.start)}: ${pct(c.available, c.checks)}% (${int(c.available)}/${int(c.checks)})${underMaintenance(c)}`
    : c.maintenance
      ? `${isoDay(c.start)}: maintenance (${int(c.maintenance)} checks)`
      : `${isoDay(c.start)}: no data`;

/** A tooltip's mention of the checks under maintenance, left out of its percent. */
const underMaintenance = (c: UptimeCell) =>
  c.maintenance ? `, ${int(c.maintenance)} under maintenance` : "";

/** A list row's bar: the day cells of the last 90 days. */
function listBar(bar: UptimeBar | undefined, now: Date): string {
  const cells =
    bar?.cells ??
    Array.from({ length: BAR_DAYS }, (_, i) => ({
      start: new Date(Math.floor(now.getTime() / 86_400_000) * 86_400_000 - (BAR_DAYS - 1 - i) * 86_400_000),
      checks: 0,
      available: 0,
      maintenance: 0,
      avgResponseMs: null,
    }));
  return barHtml(cells, "90-day uptime", dayTitle, bar ?? { checks: 0, available: 0 });
}

/**
 * A query or form through a REST schema: the first problem as the API words it, as a ServiceError
 * naming the field (`query.status`, `body.base_url`), so `fieldErrors` puts it next to the field.
 */
function parseWith<S extends z.ZodType>(schema: S, input: Record<string, unknown>, part: "query" | "body") {
  const r = schema.safeParse(input);
  if (r.success) return r.data as z.output<S>;
  const issue = r.error.issues[0];
  if (!issue) throw invalidInput(part, "is invalid");
  const field = [part, ...issue.path.map(String)].join(".");
  throw new ServiceError(
    "invalid_input",
    `${field}: ${issueMessage(input, issue, { query: part === "query" })}`,
    { field },
  );
}

/** Another tenant's connection: the plain 404 page, never the core's 403. */
function hideForeign(err: unknown): never {
  if (err instanceof ServiceError && err.code === "forbidden") throw notFound("Connection not found");
  throw err;
}

/** The connection of a page: 404 for an unknown or foreign id (and for a malformed one). */
async function connectionOf(ctx: AppContext, actor: Actor, rawId: string): Promise<ListedConnection> {
  const parsed = connectionParams.safeParse({ id: rawId });
  if (!parsed.success) throw notFound("Connection not found");
  return getConnectionDetails(ctx, actor, parsed.data.id).catch(hideForeign);
}

/** Form ids already used (this process, an hour): a resent add form creates nothing the second time. */
const usedForms = perApp(() => new Map<string, number>());
const FORM_TTL_MS = 3_600_000;
function claimForm(ctx: AppContext, id: string): boolean {
  const used = usedForms(ctx);
  const now = Date.now();
  if (used.size > 10_000) for (const [k, t] of used) if (now - t > FORM_TTL_MS) used.delete(k);
  if (used.has(id)) return false;
  used.set(id, now);
  return true;
}

/** A form number: empty → absent, digits → a number, anything else as sent (the schema names it). */
function num(v: string | undefined): number | string | undefined {
  const s = (v ?? "").trim();
  if (s === "") return undefined;
  return /^-?\d+(\.\d+)?$/.test(s) ? Number(s) : s;
}
const text = (v: string | undefined) => ((v ?? "").trim() === "" ? undefined : v);

/** The fields of the add/edit form (strings, as typed; never a credential). */
export interface ConnectionForm {
  service_type: ServiceType;
  service_name: string;
  organization_id: string;
  base_url: string;
  region: string;
  check_interval_seconds: string;
  failure_threshold: string;
  heartbeat_interval_seconds: string;
  heartbeat_grace_seconds: string;
}

const MONITORING = [
  "check_interval_seconds",
  "failure_threshold",
  "heartbeat_interval_seconds",
  "heartbeat_grace_seconds",
] as const;

/** What each kind's form shows (and sends). */
const FORM_FIELDS: Record<ServiceType, string[]> = {
  workflow_a: ["base_url", "api_key", "check_interval_seconds", "failure_threshold"],
  workflow_b: ["api_token", "region", "base_url", "check_interval_seconds", "failure_threshold"],
  gateway: ["base_url", "heartbeat_interval_seconds", "heartbeat_grace_seconds"],
};

function echoForm(kind: ServiceType, f: Record<string, string>): ConnectionForm {
  const s = (k: string) => (f[k] ?? "").slice(0, 2100);
  return {
    service_type: kind,
    service_name: s("service_name"),
    organization_id: s("organization_id"),
    base_url: s("base_url"),
    region: s("region"),
    check_interval_seconds: s("check_interval_seconds"),
    failure_threshold: s("failure_threshold"),
    heartbeat_interval_seconds: s("heartbeat_interval_seconds"),
    heartbeat_grace_seconds: s("heartbeat_grace_seconds"),
  };
}

function formFromConnection(c: ListedConnection): ConnectionForm {
  const n = (v: number | null) => (v === null ? "" : String(v));
  return {
    service_type: c.service_type as ServiceType,
    service_name: c.service_name,
    organization_id: c.organization_id ?? "personal",
    base_url: c.base_url ?? "",
    region: c.region ?? "",
    check_interval_seconds: n(c.check_interval_seconds),
    failure_threshold: n(c.failure_threshold),
    heartbeat_interval_seconds: n(c.heartbeat_interval_seconds),
    heartbeat_grace_seconds: n(c.heartbeat_grace_seconds),
  };
}

/** The REST create body from the add form: only the chosen kind's fields, empty ones left out. */
function createBodyOf(kind: ServiceType, f: Record<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {
    service_type: kind,
    service_name: f.service_name ?? "",
    organization_id: f.organization_id || "personal",
  };
  for (const k of FORM_FIELDS[kind]) {
    const v = (MONITORING as readonly string[]).includes(k) ? num(f[k]) : text(f[k]);
    if (v !== undefined) body[k] = v;
  }
  return body;
}

/**
 * The REST update body from the edit form: the name and organization; an address or region only
 * when changed (a new address puts the connection back to `inactive` until checked); a credential
 * only when typed (empty keeps the stored one); a monitoring setting as typed, empty meaning the
 * plan's default (null).
 */
function updateBodyOf(c: ListedConnection, f: Record<string, string>): Record<string, unknown> {
  const kind = c.service_type as ServiceType;
  const body: Record<string, unknown> = {
    service_name: f.service_name ?? "",
    organization_id: f.organization_id || "personal",
  };
  for (const k of FORM_FIELDS[kind]) {
    const v = f[k] ?? "";
    if (k === "api_key" || k === "api_token") {
      if (v !== "") body[k] = v;
    } else if (k === "base_url") {
      if (v !== (c.base_url ?? "") && (v !== "" || kind === "workflow_a")) body[k] = v;
    } else if (k === "region") {
      if (v.trim() !== (c.region ?? "")) body[k] = text(v) ?? null;
    } else body[k] = num(v) ?? null;
  }
  return body;
}

const emptyErrors = (): FormErrors => ({ fields: {}, form: null });

export async function registerConnectionPages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  // ---- the list --------------------------------------------------------------------------
  scope.get("/connections", async (req, reply) => {
    const actor = dashboardActor(req);
    const raw = (req.query ?? {}) as Q;
    const filters: Record<string, string> = {};
    for (const k of ["service_type", "status", "organization_id", "offset"]) {
      const v = raw[k];
      filters[k] = typeof v === "string" ? v.slice(0, 200) : "";
    }
    let errors = emptyErrors();
    let query: z.output<typeof listConnectionsQuery> | null = null;
    try {
      const input: Record<string, unknown> = { limit: String(PAGE_SIZE) };
      for (const k of ["service_type", "status", "organization_id", "offset"])
        if (raw[k] !== undefined && raw[k] !== "") input[k] = raw[k];
      query = parseWith(listConnectionsQuery, input, "query");
    } catch (err) {
      errors = fieldErrors(err);
    }
    const [organizations, list] = await Promise.all([
      listMyOrganizations(ctx, actor),
      query
        ? listConnections(ctx, actor, {
            serviceType: query.service_type,
            status: query.status,
            organizationId: query.organization_id,
            limit: query.limit,
            offset: query.offset,
          })
        : Promise.resolve({ rows: [] as ListedConnection[], total: 0 }),
    ]);
    const ids = list.rows.map((r) => r.id);
    const [bars, latest] = await Promise.all([
      uptimeBars(ctx, actor, ids, BAR_DAYS),
      latestChecks(ctx, actor, ids),
    ]);
    const now = ctx.now();
    const rows = list.rows.map((c) => {
      const last = latest.get(c.id);
      return {
        id: c.id,
        name: c.service_name,
        kind: KIND_SHORT[c.service_type] ?? c.service_type,
        status: c.status,
        organization: c.organizations?.name ?? null,
        lastCheck: last ? last.at.toISOString() : null,
        lastUp: last?.available ?? null,
        lastMs: last?.responseTimeMs ?? null,
        bar: listBar(bars.get(c.id), now),
        uptime: bars.get(c.id)?.uptimePercent ?? null,
      };
    });
    const offset = query?.offset ?? 0;
    const link = (o: number) => {
      const p = new URLSearchParams();
      for (const k of ["service_type", "status", "organization_id"]) if (filters[k]) p.set(k, filters[k]);
      if (o > 0) p.set("offset", String(o));
      const s = p.toString();
      return `/connections${s ? `?${s}` : ""}`;
    };
    const notice = NOTICES[String(raw.notice ?? "")] ?? null;
    const hasErrors = Boolean(errors.form) || Object.keys(errors.fields).length > 0;
    return page(
      reply,
      "connections/list",
      {
        frame: frameOf(req, reply, notice),
        rows,
        total: list.total,
        from: list.rows.length ? offset + 1 : 0,
        to: offset + list.rows.length,
        prevHref: offset > 0 ? link(Math.max(0, offset - PAGE_SIZE)) : null,
        nextHref: offset + list.rows.length < list.total ? link(offset + PAGE_SIZE) : null,
        filters,
        filtered: Boolean(filters.service_type || filters.status || filters.organization_id),
        kinds: SERVICE_TYPES.map((k) => [k, k]),
        statuses: CONNECTION_STATUSES.map((s) => [s, s]),
        organizations: [["personal", "Personal"], ...organizations.map((o) => [o.id, o.name])],
        errors,
      },
      hasErrors ? 400 : 200,
    );
  });

  // ---- add -------------------------------------------------------------------------------
  const formPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    opts: {
      mode: "create" | "edit";
      form: ConnectionForm;
      errors: FormErrors;
      status?: number;
      connection?: ListedConnection;
    },
  ) => {
    const actor = dashboardActor(req);
    const organizations = await listMyOrganizations(ctx, actor);
    const kind = opts.form.service_type;
    return page(
      reply,
      "connections/form",
      {
        frame: frameOf(req, reply),
        mode: opts.mode,
        form: opts.form,
        errors: opts.errors,
        kind,
        kindWords: KIND_WORDS,
        kinds: SERVICE_TYPES,
        fields: FORM_FIELDS[kind],
        organizations: [["personal", "Personal (only you)"], ...organizations.map((o) => [o.id, o.name])],
        connection: opts.connection ?? null,
        stored: opts.connection
          ? {
              api_key: opts.connection._credential_lengths.api_key > 0,
              api_token: opts.connection._credential_lengths.api_token > 0,
            }
          : { api_key: false, api_token: false },
        formId: randomBytes(12).toString("base64url"),
      },
      opts.status ?? 200,
    );
  };

  const kindOf = (v: unknown): ServiceType | null =>
    typeof v === "string" && (SERVICE_TYPES as readonly string[]).includes(v) ? (v as ServiceType) : null;

  scope.get("/connections/new", async (req, reply) => {
    const raw = (req.query ?? {}) as Q;
    const kind = kindOf(raw.kind ?? "workflow_a");
    if (!kind) throw invalidInput("kind", `must be one of ${SERVICE_TYPES.join(", ")}`);
    return formPage(req, reply, { mode: "create", form: echoForm(kind, {}), errors: emptyErrors() });
  });

  scope.post("/connections/new", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const actor = dashboardActor(req);
    const f = formOf(req);
    const kind = kindOf(f.service_type);
    const form = echoForm(kind ?? "workflow_a", f);
    if (!kind)
      return formPage(req, reply, {
        mode: "create",
        form,
        errors: { fields: { service_type: `must be one of ${SERVICE_TYPES.join(", ")}` }, form: null },
        status: 400,
      });
    const formId = f.form_id ?? "";
    if (!/^[A-Za-z0-9_-]{16}$/.test(formId))
      return formPage(req, reply, {
        mode: "create",
        form,
        errors: { fields: {}, form: "The form could not be read; nothing was created. Reload the page." },
        status: 400,
      });
    let created: Awaited<ReturnType<typeof createConnection>>;
    try {
      const body = parseWith(createConnectionBody, createBodyOf(kind, f), "body");
      if (!claimForm(ctx, formId))
        return formPage(req, reply, {
          mode: "create",
          form,
          errors: {
            fields: {},
            form: "This form was already sent: the connection was created then (it is in your list) and was not created twice.",
          },
          status: 409,
        });
      created = await createConnection(ctx, actor, body);
    } catch (err) {
      const errors = fieldErrors(err);
      const status = err instanceof ServiceError ? statusOfError(err) : 400;
      return formPage(req, reply, { mode: "create", form, errors, status });
    }
    if (created.ingest_api_key)
      // the gateway's ingestion key, shown once in this answer (no-store, never in a URL)
      return page(
        reply,
        "connections/created",
        {
          frame: frameOf(req, reply),
          connection: created.connection,
          ingestKey: created.ingest_api_key,
          publicUrl: ctx.config.publicUrl,
        },
        201,
      );
    return reply.code(303).header("location", `/connections/${created.connection.id}?notice=created`).send();
  });

  // ---- edit ------------------------------------------------------------------------------
  scope.get<{ Params: { id: string } }>("/connections/:id/edit", async (req, reply) => {
    const c = await connectionOf(ctx, dashboardActor(req), req.params.id);
    return formPage(req, reply, {
      mode: "edit",
      form: formFromConnection(c),
      errors: emptyErrors(),
      connection: c,
    });
  });

  scope.post<{ Params: { id: string } }>(
    "/connections/:id/edit",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const actor = dashboardActor(req);
      const c = await connectionOf(ctx, actor, req.params.id);
      const f = formOf(req);
      const form = echoForm(c.service_type as ServiceType, f);
      try {
        const body = parseWith(updateConnectionBody, updateBodyOf(c, f), "body");
        await updateConnection(ctx, actor, c.id, body);
      } catch (err) {
        const errors = fieldErrors(err);
        const status = err instanceof ServiceError ? statusOfError(err) : 400;
        return formPage(req, reply, { mode: "edit", form, errors, status, connection: c });
      }
      return reply.code(303).header("location", `/connections/${c.id}?notice=updated`).send();
    },
  );

  // ---- delete ----------------------------------------------------------------------------
  scope.post<{ Params: { id: string } }>(
    "/connections/:id/delete",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const actor = dashboardActor(req);
      const c = await connectionOf(ctx, actor, req.params.id);
      // a member of the connection's organization may see it but not delete it: the core's 403
      await deleteConnection(ctx, actor, c.id);
      return reply.code(303).header("location", "/connections?notice=deleted").send();
    },
  );

  // ---- one connection --------------------------------------------------------------------
  /** The connection's page; `slo` carries the SLO form as sent and its errors after a refused post. */
  const detailPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    c: ListedConnection,
    opts: { range?: TimelineRange; notice?: string | null; slo?: SloFormState; status?: number } = {},
  ) => {
    const actor = dashboardActor(req);
    const range = opts.range ?? "24h";
    const workflow = c.service_type === "workflow_a" || c.service_type === "workflow_b";
    const gateway = c.service_type === "gateway";
    const [timeline, incidents, anomalies, budget, executions, usage, latest, slo] = await Promise.all([
      availabilityTimeline(ctx, actor, c.id, range),
      listIncidents(ctx, actor, { connectionId: c.id, limit: 20 }),
      listAnomalies(ctx, actor, { connectionId: c.id, limit: 10 }),
      getConnectionBudget(ctx, actor, c.id),
      workflow
        ? listExecutions(ctx, actor, { connectionId: c.id, limit: 10, includeErrorDetails: true })
        : Promise.resolve(null),
      gateway ? gatewayUsage(ctx, actor, { connectionId: c.id, period: "month" }) : Promise.resolve(null),
      latestChecks(ctx, actor, [c.id]),
      sloPanel(ctx, actor, c.id),
    ]);
    const last = latest.get(c.id) ?? null;
    return page(
      reply,
      "connections/detail",
      {
        frame: frameOf(req, reply, opts.notice ?? null),
        charts: true,
        c,
        kindWords: KIND_WORDS[c.service_type as ServiceType] ?? c.service_type,
        workflow,
        gateway,
        range,
        ranges: TIMELINE_RANGES,
        timeline: timelineView(timeline),
        chartJson: chartJson(timeline),
        last: last ? { at: last.at.toISOString(), up: last.available, ms: last.responseTimeMs } : null,
        openIncidents: incidents.rows.filter((i) => i.status !== "resolved"),
        recentIncidents: incidents.rows.filter((i) => i.status === "resolved").slice(0, 10),
        anomalies: anomalies.rows,
        budget,
        executions: executions?.rows ?? null,
        usage,
        slo: {
          ...slo,
          form: opts.slo?.form ?? slo.form,
          errors: opts.slo?.errors ?? emptyErrors(),
          windows: WINDOW_DAYS.map((d) => [String(d), `${d} days`]),
        },
        usd: (v: number) =>
          `$${v.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: v < 1 && v > 0 ? 4 : 2 })}`,
        int,
      },
      opts.status ?? 200,
    );
  };

  scope.get<{ Params: { id: string } }>("/connections/:id", async (req, reply) => {
    const raw = (req.query ?? {}) as Q;
    const range = (raw.range ?? "24h") as TimelineRange;
    if (!TIMELINE_RANGES.includes(range))
      throw invalidInput("range", `must be one of ${TIMELINE_RANGES.join(", ")}`);
    const c = await connectionOf(ctx, dashboardActor(req), req.params.id);
    return detailPage(req, reply, c, { range, notice: NOTICES[String(raw.notice ?? "")] ?? null });
  });

  // ---- its SLO: PUT and DELETE /v1/connections/{id}/slo from a form ----------------------
  scope.post<{ Params: { id: string } }>(
    "/connections/:id/slo",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const actor = dashboardActor(req);
      const c = await connectionOf(ctx, actor, req.params.id);
      const f = formOf(req);
      const form = {
        objective: (f.objective ?? "").slice(0, 50),
        window_days: (f.window_days ?? "").slice(0, 10),
      };
      try {
        // the REST body's parser, so a bad field gets the API's words (a percentage is named as one)
        const input: Record<string, unknown> = {};
        for (const k of ["objective", "window_days"] as const) {
          const v = num(form[k]);
          if (v !== undefined) input[k] = v;
        }
        await putSlo(ctx, actor, c.id, validateSloBody(input));
      } catch (err) {
        const status = err instanceof ServiceError ? statusOfError(err) : 400;
        return detailPage(req, reply, c, { slo: { form, errors: fieldErrors(err) }, status });
      }
      return reply.code(303).header("location", `/connections/${c.id}?notice=slo_set#slo-h`).send();
    },
  );

  scope.post<{ Params: { id: string } }>(
    "/connections/:id/slo/delete",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const actor = dashboardActor(req);
      const c = await connectionOf(ctx, actor, req.params.id);
      try {
        // removing one that is not set is no error, as DELETE answers
        await removeSlo(ctx, actor, c.id);
      } catch (err) {
        const status = err instanceof ServiceError ? statusOfError(err) : 400;
        return detailPage(req, reply, c, { slo: { errors: fieldErrors(err) }, status });
      }
      return reply.code(303).header("location", `/connections/${c.id}?notice=slo_removed#slo-h`).send();
    },
  );
}

/** The SLO form as typed (strings) and the errors of a refused post. */
interface SloFormState {
  form?: { objective: string; window_days: string };
  errors: FormErrors;
}

/** A fraction as a percent with at most `digits` decimals: 0.999 → "99.9", -3.147465 → "-314.75". */
const percent = (x: number, digits: number) => String(Number((x * 100).toFixed(digits)));

/**
 * The SLO panel of a connection's page: GET /v1/connections/{id}/slo's answer (getSlo, so the
 * REST visibility rules hold) in words, and the burn-down of slo/burndown.ts read at the same
 * moment. Every value is a number or a date: the chart is built here, the template escapes the rest.
 */
async function sloPanel(ctx: AppContext, actor: Actor, connectionId: string) {
  const status = await getSlo(ctx, actor, connectionId);
  if (status.objective === null || status.window_days === null || !status.error_budget)
    return { set: false as const, form: { objective: "0.999", window_days: "30" } };
  const burndown = await sloBurndown(
    ctx,
    { connection_id: connectionId, objective: status.objective, window_days: status.window_days },
    ctx.now(),
  );
  const remaining = status.error_budget.remaining;
  return {
    set: true as const,
    form: { objective: String(status.objective), window_days: String(status.window_days) },
    objective: status.objective,
    objectivePercent: percent(status.objective, 5),
    windowDays: status.window_days,
    windowStart: (status.window_start ?? "").slice(0, 10),
    remaining,
    remainingPercent: percent(remaining, 2),
    overspent: remaining < 0,
    sli: sliView(status),
    burnRates: (Object.keys(BURN_WINDOWS) as (keyof typeof BURN_WINDOWS)[]).map((w) => {
      const rate = status.burn_rates?.[w] ?? null;
      return { window: w, rate, words: rate === null ? "no checks" : String(Number(rate.toFixed(2))) };
    }),
    chart: burndownSvg(burndown),
    points: burndown.points.length,
    // the chart's scale: 100 % at the top, 0 % or the lowest point (overspent) at the bottom
    scaleBottom: percent(Math.min(0, ...burndown.points.map((p) => p.remaining)), 2),
    rows: burndown.points
      .filter((p) => p.checks > 0)
      .reverse()
      .map((p) => ({
        day: p.day,
        checks: int(p.checks),
        failed: int(p.failed),
        remaining: `${percent(p.remaining, 2)}%`,
      })),
  };
}

function sliView(status: SloStatus) {
  const sli = status.sli;
  if (!sli || sli.availability === null) return null;
  return { percent: percent(sli.availability, 4), checks: int(sli.checks), failed: int(sli.failed) };
}

/**
 * The burn-down as an inline SVG built here (every value a number or an ISO day, nothing to
 * escape; presentation attributes and `currentColor`, as the CSP allows no inline style): one
 * circle per UTC day of the window with its figures as a tooltip, joined by a line, and a dashed
 * line at 0 (the budget spent). The vertical scale runs from 100 % down to 0 % or to the lowest
 * point when the budget is overspent. The page's table has the same numbers.
 */
function burndownSvg(b: Burndown): string {
  const W = 800;
  const H = 160;
  const PAD = 6;
  const top = 1;
  const bottom = Math.min(0, ...b.points.map((p) => p.remaining));
  const n = b.points.length;
  const x = (i: number) => (n === 1 ? W / 2 : PAD + (i * (W - 2 * PAD)) / (n - 1));
  const y = (v: number) => PAD + ((top - v) / (top - bottom)) * (H - 2 * PAD);
  const f = (v: number) => v.toFixed(1);
  const title = (p: BurndownPoint) =>
    `${p.day}: ${percent(p.remaining, 2)}% of the budget left${p.checks ? ` (${int(p.failed)} failed of ${int(p.checks)} checks that day)` : " (no checks that day)"}`;
  const zero = y(0);
  let svg = `<svg class="burndown" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-labelledby="slo-chart-caption" focusable="false">`;
  svg += `<line x1="0" x2="${W}" y1="${f(zero)}" y2="${f(zero)}" stroke="currentColor" stroke-opacity="0.45" stroke-dasharray="6 4"/>`;
  svg += `<polyline fill="none" stroke="currentColor" stroke-width="2" points="${b.points.map((p, i) => `${f(x(i))},${f(y(p.remaining))}`).join(" ")}"/>`;
  b.points.forEach((p, i) => {
    svg += `<circle data-day="${p.day}" data-remaining="${p.remaining}" cx="${f(x(i))}" cy="${f(y(p.remaining))}" r="3.5" fill="${p.remaining < 0 ? "none" : "currentColor"}" stroke="currentColor"><title>${title(p)}</title></circle>`;
  });
  return `${svg}</svg>`;
}

const RANGE_WORDS: Record<TimelineRange, string> = {
  "24h": "24 hours",
  "7d": "7 days",
  "30d": "30 days",
  "90d": "90 days",
};

/** A bucket's label: a day for daily buckets, an hour or a time otherwise (UTC). */
function bucketLabel(d: Date, bucketMs: number): string {
  const iso = d.toISOString();
  if (bucketMs >= 86_400_000) return iso.slice(0, 10);
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

function timelineView(t: AvailabilityTimeline) {
  const title = (c: UptimeCell) =>
    c.checks
      ? `${bucketLabel(c.start, t.bucketMs)}: ${pct(c.available, c.checks)}% (${int(c.available)} of ${int(c.checks)} checks)${underMaintenance(c)}`
      : c.maintenance
        ? `${bucketLabel(c.start, t.bucketMs)}: maintenance (${int(c.maintenance)} checks)`
        : `${bucketLabel(c.start, t.bucketMs)}: no data`;
  return {
    words: RANGE_WORDS[t.range],
    bar: barHtml(t.cells, `${RANGE_WORDS[t.range]} uptime`, title, t),
    checks: t.checks,
    available: t.available,
    uptime: t.uptimePercent,
    avgMs: t.avgResponseMs,
    truncated: t.truncated,
    bucketWords:
      t.bucketMs >= 86_400_000 ? "day" : t.bucketMs >= 3_600_000 ? "hour" : `${t.bucketMs / 60_000} minutes`,
    // the table: buckets with checks, newest first
    rows: t.cells
      .filter((c) => c.checks > 0)
      .reverse()
      .map((c) => ({
        label: bucketLabel(c.start, t.bucketMs),
        checks: int(c.checks),
        uptime: `${pct(c.available, c.checks)}%`,
        ms: c.avgResponseMs === null ? "–" : `${int(c.avgResponseMs)} ms`,
      })),
  };
}

/**
 * The chart's data for assets/charts.js, as JSON inside `<script type="application/json">` (the CSP
 * runs no inline script; a data block is not run): times in Unix seconds, the mean response time
 * and the uptime percent per bucket (null where no check ran). `<` is escaped so no text in it can
 * close the element.
 */
function chartJson(t: AvailabilityTimeline): string {
  const data = {
    range: t.range,
    bucket_seconds: t.bucketMs / 1000,
    t: t.cells.map((c) => Math.floor(c.start.getTime() / 1000)),
    rt: t.cells.map((c) => c.avgResponseMs),
    up: t.cells.map((c) => (c.checks ? Math.round((c.available / c.checks) * 100_000) / 1000 : null)),
  };
  return JSON.stringify(data).replace(/</g, "\\u003c");
}
