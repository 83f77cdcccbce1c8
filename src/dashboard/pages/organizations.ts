import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../core/context.js";
import { ServiceError } from "../../core/errors.js";
import { inviteMember, listInvitations, revokeInvitation } from "../../identity/invitations.js";
import {
  changeRole,
  createOrganization,
  getOrganization,
  leaveOrganization,
  listMyOrganizations,
  removeMember,
  renameOrganization,
} from "../../identity/organizations.js";
import { profileOf } from "../../identity/profile.js";
import { fieldErrors, type FormErrors, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * The organizations pages (issue #15, point 3): the user's organizations and a form to create
 * one; an organization's page with its members (change a role, remove), invitations (invite,
 * revoke), rename and leave. Every rule (who may, the last owner) and every audit entry is the
 * core's (src/identity/organizations.ts, invitations.ts): a refused change answers the core's
 * status (403, 404, 409) with its message on the page, and nothing changes.
 */

const NOTICES: Record<string, string> = {
  created: "The organization was created. You are its owner.",
  renamed: "The organization was renamed.",
  role: "The role was changed.",
  removed: "The member was removed.",
  left: "You left the organization.",
  invited: "The invitation is on its way by e-mail. The link works once and expires after 7 days.",
  revoked: "The invitation was revoked; its link no longer works.",
  joined: "Welcome: you joined the organization.",
};

type Params = { Params: { id: string } };
type Form = "members" | "invite" | "rename" | "leave";
type PageErrors = FormErrors & { on: Form };

const noticeOf = (req: FastifyRequest) =>
  NOTICES[String((req.query as Record<string, unknown>).notice ?? "")] ?? null;

export async function registerOrganizationPages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const listPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    values: { name?: string },
    errors: FormErrors | null,
    status = 200,
  ) => {
    const actor = dashboardActor(req);
    const [orgs, me] = await Promise.all([listMyOrganizations(ctx, actor), profileOf(ctx, actor)]);
    return page(
      reply,
      "organizations/list",
      { frame: frameOf(req, reply, noticeOf(req)), orgs, plan: me.plan, values, errors },
      status,
    );
  };

  scope.get("/organizations", async (req, reply) => listPage(req, reply, {}, null));

  scope.post("/organizations", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const name = (formOf(req).name ?? "").slice(0, 1000);
    try {
      const org = await createOrganization(ctx, dashboardActor(req), { name });
      return reply.code(303).header("location", `/organizations/${org.id}?notice=created`).send();
    } catch (err) {
      if (err instanceof ServiceError && err.code !== "not_found")
        return listPage(req, reply, { name }, fieldErrors(err), statusOfError(err));
      throw err;
    }
  });

  const detailPage = async (
    req: FastifyRequest<Params>,
    reply: FastifyReply,
    values: Record<string, string>,
    errors: PageErrors | null,
    status = 200,
  ) => {
    const actor = dashboardActor(req);
    const org = await getOrganization(ctx, actor, req.params.id);
    const invitations = await listInvitations(ctx, actor, req.params.id);
    return page(
      reply,
      "organizations/detail",
      {
        frame: frameOf(req, reply, errors ? null : noticeOf(req)),
        org,
        invitations,
        values,
        errors,
        mailConfigured: !!ctx.config.smtpUrl,
      },
      status,
    );
  };

  scope.get<Params>("/organizations/:id", async (req, reply) => detailPage(req, reply, {}, null));

  /**
   * A form on an organization's page: runs the core verb, then goes back to the page with a
   * notice; a refusal re-renders the page with the core's status and message next to the form
   * (an organization the user is not a member of stays a plain 404 page).
   */
  const action = <P extends Record<string, string>>(
    path: string,
    form: Form,
    run: (req: FastifyRequest<{ Params: P & { id: string } }>, f: Record<string, string>) => Promise<string>,
  ) =>
    scope.post<{ Params: P & { id: string } }>(
      path,
      { preHandler: scope.csrfProtection },
      async (req, reply) => {
        const f = formOf(req);
        let to: string;
        try {
          to = await run(req, f);
        } catch (err) {
          if (!(err instanceof ServiceError)) throw err;
          // an organization the user cannot see: the plain 404 page, as for a GET
          if (err.code === "not_found" && !(await isMember(req))) throw err;
          const e = fieldErrors(err);
          const message =
            e.form ?? (form === "members" || form === "leave" ? Object.values(e.fields)[0] : null);
          return detailPage(
            req as FastifyRequest<Params>,
            reply,
            form === "invite" || form === "rename" ? f : {},
            { fields: e.fields, form: message ?? null, on: form },
            statusOfError(err),
          );
        }
        return reply.code(303).header("location", to).send();
      },
    );

  /** Whether the user may see the organization at all (to tell a missing member or invitation from a missing organization). */
  const isMember = async (req: FastifyRequest<{ Params: { id: string } }>) =>
    getOrganization(ctx, dashboardActor(req), req.params.id).then(
      () => true,
      () => false,
    );

  action("/organizations/:id/name", "rename", async (req, f) => {
    await renameOrganization(ctx, dashboardActor(req), req.params.id, {
      name: (f.name ?? "").slice(0, 1000),
    });
    return `/organizations/${req.params.id}?notice=renamed`;
  });

  action<{ userId: string }>("/organizations/:id/members/:userId/role", "members", async (req, f) => {
    await changeRole(ctx, dashboardActor(req), req.params.id, {
      userId: req.params.userId,
      role: f.role ?? "",
    });
    return `/organizations/${req.params.id}?notice=role`;
  });

  action<{ userId: string }>("/organizations/:id/members/:userId/remove", "members", async (req) => {
    await removeMember(ctx, dashboardActor(req), req.params.id, { userId: req.params.userId });
    return req.params.userId === dashboardActor(req).userId
      ? "/organizations?notice=left"
      : `/organizations/${req.params.id}?notice=removed`;
  });

  action("/organizations/:id/leave", "leave", async (req) => {
    await leaveOrganization(ctx, dashboardActor(req), req.params.id);
    return "/organizations?notice=left";
  });

  action("/organizations/:id/invitations", "invite", async (req, f) => {
    await inviteMember(ctx, dashboardActor(req), req.params.id, {
      email: (f.email ?? "").slice(0, 1000),
      role: f.role ?? "member",
    });
    return `/organizations/${req.params.id}?notice=invited`;
  });

  action<{ invitationId: string }>(
    "/organizations/:id/invitations/:invitationId/revoke",
    "invite",
    async (req) => {
      await revokeInvitation(ctx, dashboardActor(req), req.params.id, req.params.invitationId);
      return `/organizations/${req.params.id}?notice=revoked`;
    },
  );
}
