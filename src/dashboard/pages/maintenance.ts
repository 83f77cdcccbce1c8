import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { listConnections } from "../../connections/list.js";
import { ServiceError, invalidInput, notFound } from "../../core/errors.js";
import type { AppContext } from "../../core/context.js";
import { keyOrganizationsFor } from "../../identity/key-service.js";
import { listMyOrganizations } from "../../identity/organizations.js";
import { fromWall, isTimeZone } from "../../maintenance/schedule.js";
import { validateMaintenanceBody } from "../../maintenance/schema.js";
import {
  createMaintenanceWindow,
  deleteMaintenanceWindow,
  listMaintenanceWindows,
} from "../../maintenance/windows.js";
import { fieldErrors, type FormErrors, formList, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * Maintenance (docs/maintenance.md): the maintenance windows the signed-in user sees (personal
 * ones and those of every organization the user belongs to), each with what it covers, its
 * schedule, whether it is active now and its next occurrence; a form to add a one-off or a
 * recurring (RRULE) window over some connections or a whole organization; delete with a
 * confirmation. Every read and write is the core's (src/maintenance/windows.ts), the functions
 * REST calls, with the body checked by REST's own parser, so a bad field gets the API's message.
 *
 * The form's times are wall-clock times (`<input type="datetime-local">`) read in the form's
 * time zone (UTC by default): a one-off window's start and end are turned into instants here; a
 * recurring window's rule is read in that zone by the core.
 */

const NOTICES: Record<string, string> = {
  created: "The maintenance window was added.",
  deleted: "The maintenance window was deleted: it no longer covers its connections.",
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const WALL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/;

/** The add form as typed. */
interface WindowForm {
  schedule: "one_off" | "recurring";
  connection_ids: string[];
  organization_id: string;
  starts_at: string;
  ends_at: string;
  rrule: string;
  duration_minutes: string;
  timezone: string;
  recurring_starts_at: string;
}

/** `2026-01-05T02:00` of an instant in UTC, as a datetime-local input shows it. */
const wallOf = (ms: number) => new Date(ms).toISOString().slice(0, 16);

function emptyForm(now: Date): WindowForm {
  const start = Math.floor(now.getTime() / 60_000) * 60_000;
  return {
    schedule: "one_off",
    connection_ids: [],
    organization_id: "",
    starts_at: wallOf(start),
    ends_at: wallOf(start + 3_600_000),
    rrule: "",
    duration_minutes: "",
    timezone: "UTC",
    recurring_starts_at: "",
  };
}

/**
 * A datetime-local value in a zone as an ISO instant, or a 400 naming the field. The zone is
 * checked first (a bad zone is the timezone field's problem, not the time's).
 */
function instantOf(value: string, timezone: string, field: string): string {
  const m = WALL.exec(value.trim());
  if (!m) throw invalidInput(`body.${field}`, "must be a date and time, e.g. 2026-01-05T02:00");
  const [y, mo, d, h, mi, sec] = m.slice(1).map((v) => Number(v ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const wall = Date.UTC(y, mo - 1, d, h, mi, sec);
  if (Number.isNaN(wall) || wallOf(wall) !== value.trim().slice(0, 16))
    throw invalidInput(`body.${field}`, "is not a real date and time");
  return new Date(fromWall(wall, timezone)).toISOString();
}

/** The REST body of the add form: only the chosen schedule's fields. */
function bodyOf(f: WindowForm): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (f.organization_id) body.organization_id = f.organization_id;
  if (f.connection_ids.length) body.connection_ids = f.connection_ids;
  if (!f.organization_id && !f.connection_ids.length) body.connection_ids = [];
  const tz = f.timezone.trim() || "UTC";
  if (f.schedule === "one_off") {
    if (!isTimeZone(tz))
      throw invalidInput("body.timezone", `"${tz}" is not a known IANA time zone, e.g. Europe/Paris or UTC`);
    body.starts_at = instantOf(f.starts_at, tz, "starts_at");
    body.ends_at = instantOf(f.ends_at, tz, "ends_at");
    return body;
  }
  body.rrule = f.rrule.trim();
  const d = f.duration_minutes.trim();
  body.duration_minutes = /^\d+$/.test(d) ? Number(d) : d === "" ? undefined : d;
  body.timezone = tz;
  if (f.recurring_starts_at.trim()) {
    if (!isTimeZone(tz))
      throw invalidInput("body.timezone", `"${tz}" is not a known IANA time zone, e.g. Europe/Paris or UTC`);
    body.starts_at = instantOf(f.recurring_starts_at, tz, "recurring_starts_at");
  }
  return body;
}

/** Errors by form field; a recurring window's `starts_at` is the recurring start field. */
function errorsOf(err: unknown, schedule: WindowForm["schedule"]): FormErrors {
  const e = fieldErrors(err);
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(e.fields)) {
    let key = k.replace(/\.\d+$/, "");
    if (key === "starts_at" && schedule === "recurring") key = "recurring_starts_at";
    fields[key] = v;
  }
  // a connection the user may not see or manage (403/404 without a field): said at the connections
  if (!e.form || !(err instanceof ServiceError)) return { fields, form: e.form };
  if ((err.code === "forbidden" || err.code === "not_found") && /connection/i.test(err.message))
    return { fields: { ...fields, connection_ids: e.form }, form: null };
  if (err.code === "forbidden" && /organization/i.test(err.message))
    return { fields: { ...fields, organization_id: e.form }, form: null };
  return { fields, form: e.form };
}

const emptyErrors = (): FormErrors => ({ fields: {}, form: null });

export async function registerMaintenancePages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const listPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    s: { form?: WindowForm; errors?: FormErrors; listError?: string | null; status?: number } = {},
  ) => {
    const actor = dashboardActor(req);
    const [{ maintenance_windows: windows }, connections, orgs, managed] = await Promise.all([
      listMaintenanceWindows(ctx, actor),
      listConnections(ctx, actor, { limit: 500, offset: 0 }),
      listMyOrganizations(ctx, actor),
      keyOrganizationsFor(ctx, actor),
    ]);
    const connNames = new Map(connections.rows.map((c) => [c.id, c.service_name]));
    const orgNames = new Map(orgs.map((o) => [o.id, o.name]));
    const errors = s.errors ?? emptyErrors();
    const failed = Boolean(errors.form) || Object.keys(errors.fields).length > 0 || Boolean(s.listError);
    const notice = failed
      ? null
      : (NOTICES[String((req.query as Record<string, unknown> | undefined)?.notice ?? "")] ?? null);
    return page(
      reply,
      "maintenance/index",
      {
        frame: frameOf(req, reply, notice),
        windows: windows.map((w) => ({
          ...w,
          account: w.organization_id ? (orgNames.get(w.organization_id) ?? w.organization_id) : "Personal",
          covered:
            w.covers === "organization"
              ? null
              : (w.connection_ids ?? []).map((id) => connNames.get(id) ?? id),
        })),
        connections: connections.rows.map((c) => ({
          id: c.id,
          name: c.service_name,
          account: c.organizations?.name ?? "Personal",
        })),
        organizations: managed.map((o) => ({ id: o.id, name: o.name })),
        form: s.form ?? emptyForm(ctx.now()),
        errors,
        listError: s.listError ?? null,
      },
      s.status ?? 200,
    );
  };

  scope.get("/maintenance", async (req, reply) => listPage(req, reply));

  scope.post("/maintenance", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const f = formOf(req);
    const s = (k: string) => (f[k] ?? "").slice(0, 600);
    const form: WindowForm = {
      schedule: f.schedule === "recurring" ? "recurring" : "one_off",
      connection_ids: formList(req, "connection_ids").slice(0, 200),
      organization_id: s("organization_id"),
      starts_at: s("starts_at"),
      ends_at: s("ends_at"),
      rrule: s("rrule"),
      duration_minutes: s("duration_minutes"),
      timezone: s("timezone"),
      recurring_starts_at: s("recurring_starts_at"),
    };
    try {
      const body = validateMaintenanceBody(bodyOf(form));
      await createMaintenanceWindow(ctx, dashboardActor(req), body);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return listPage(req, reply, {
        form,
        errors: errorsOf(err, form.schedule),
        status: statusOfError(err),
      });
    }
    return reply.code(303).header("location", "/maintenance?notice=created").send();
  });

  scope.post<{ Params: { id: string } }>(
    "/maintenance/:id/delete",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      if (!UUID.test(req.params.id)) throw notFound("Maintenance window not found");
      try {
        await deleteMaintenanceWindow(ctx, dashboardActor(req), req.params.id.toLowerCase());
      } catch (err) {
        // an organization's window, as a member: the core's 403, said on the list
        if (!(err instanceof ServiceError) || err.code !== "forbidden") throw err;
        return listPage(req, reply, { listError: err.message, status: statusOfError(err) });
      }
      return reply.code(303).header("location", "/maintenance?notice=deleted").send();
    },
  );
}
