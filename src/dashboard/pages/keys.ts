import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { PERMISSIONS } from "../../core/actor.js";
import { type AppContext, perApp } from "../../core/context.js";
import { ServiceError } from "../../core/errors.js";
import {
  createKeyFor,
  KEY_NAME_MAX,
  keyOrganizationsFor,
  listKeysFor,
  revokeKeyFor,
} from "../../identity/key-service.js";
import { fieldErrors, type FormErrors, formList, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * Profile → API keys: the signed-in user's keys (every kind, revoked ones in their own table),
 * a form to create a personal or organization key, and revocation with a confirmation. The
 * rules are the core's (identity/key-service.ts), the CLI's rules.
 *
 * A new key is shown once, in the answer to the form's POST (no-store, never in a URL, a
 * redirect or a log). Reloading that answer would send the form again: each form carries a
 * one-time `form_id`, and a second post of the same form creates nothing and says so.
 */

/** `?notice=` values this page shows after a redirect. */
const NOTICES: Record<string, string> = {
  revoked: "The key was revoked; it no longer works.",
  already_revoked: "That key was already revoked; nothing changed.",
};

/** Form ids already used (this process; an hour), so a resent form does not make a second key. */
const usedForms = perApp(() => new Map<string, number>());
const FORM_TTL_MS = 3_600_000;

function claimForm(ctx: AppContext, id: string): boolean {
  const used = usedForms(ctx);
  const now = Date.now();
  if (used.size > 10_000)
    for (const [k, t] of used) if (now - t > FORM_TTL_MS || used.size > 10_000) used.delete(k);
  if (used.has(id)) return false;
  used.set(id, now);
  return true;
}

interface KeyForm {
  name: string;
  permissions: string[];
  organization_id: string;
}

const emptyForm = (): KeyForm => ({ name: "", permissions: ["connections:read"], organization_id: "" });

export async function registerKeyPages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const listPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    form: KeyForm,
    errors: FormErrors,
    status = 200,
    notice: string | null = null,
  ) => {
    const actor = dashboardActor(req);
    const [keys, organizations] = await Promise.all([
      listKeysFor(ctx, actor),
      keyOrganizationsFor(ctx, actor),
    ]);
    return page(
      reply,
      "keys/index",
      {
        frame: frameOf(req, reply, notice),
        active: keys.filter((k) => !k.revokedAt),
        revoked: keys.filter((k) => k.revokedAt),
        organizations,
        permissions: PERMISSIONS,
        form,
        formId: randomBytes(12).toString("base64url"),
        errors,
        nameMax: KEY_NAME_MAX,
      },
      status,
    );
  };

  scope.get<{ Querystring: { notice?: string } }>("/profile/keys", async (req, reply) => {
    const notice = NOTICES[String(req.query.notice ?? "")] ?? null;
    return listPage(req, reply, emptyForm(), { fields: {}, form: null }, 200, notice);
  });

  scope.post("/profile/keys", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const actor = dashboardActor(req);
    const f = formOf(req);
    const form: KeyForm = {
      name: (f.name ?? "").slice(0, 1000),
      permissions: formList(req, "permissions"),
      organization_id: f.organization_id ?? "",
    };
    const formId = f.form_id ?? "";
    if (formId && !/^[A-Za-z0-9_-]{16}$/.test(formId))
      return listPage(
        req,
        reply,
        form,
        { fields: {}, form: "The form could not be read; reload the page." },
        400,
      );
    if (formId && !claimForm(ctx, formId))
      return listPage(
        req,
        reply,
        emptyForm(),
        {
          fields: {},
          form: "This form was already sent: the key was created then (it is in the list below) and is not shown again. If you did not copy it, revoke it and create another.",
        },
        409,
      );
    try {
      const created = await createKeyFor(ctx, actor, {
        name: form.name,
        permissions: form.permissions,
        organizationId: form.organization_id || null,
      });
      const orgName = created.organizationId
        ? ((await keyOrganizationsFor(ctx, actor)).find((o) => o.id === created.organizationId)?.name ??
          created.organizationId)
        : null;
      return page(
        reply,
        "keys/created",
        { frame: frameOf(req, reply), created, orgName, apiBase: ctx.config.publicUrl.replace(/\/$/, "") },
        201,
      );
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      // the form may be sent again once corrected
      if (formId) usedForms(ctx).delete(formId);
      const errors = fieldErrors(err);
      if (err.code === "forbidden" && form.organization_id && errors.form) {
        errors.fields.organization_id = errors.form;
        errors.form = null;
      }
      return listPage(req, reply, form, errors, statusOfError(err));
    }
  });

  scope.post<{ Params: { id: string } }>(
    "/profile/keys/:id/revoke",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const r = await revokeKeyFor(ctx, dashboardActor(req), req.params.id);
      return reply
        .code(303)
        .header("location", `/profile/keys?notice=${r.already ? "already_revoked" : "revoked"}`)
        .send();
    },
  );
}
