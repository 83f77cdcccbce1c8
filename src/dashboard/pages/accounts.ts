import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { PERMISSIONS } from "../../core/actor.js";
import type { AppContext } from "../../core/context.js";
import { ServiceError } from "../../core/errors.js";
import { sessionIdOf, setSessionCookie } from "../../http/browser.js";
import {
  acceptInvitation,
  acceptInvitationAsNewUser,
  invitationForToken,
  isGoneInvitation,
} from "../../identity/invitations.js";
import { changePassword, createFirstOwner, profileOf } from "../../identity/profile.js";
import { createSession, endSession, sessionFor } from "../../oauth/service.js";
import { anyUserExists } from "../repository.js";
import { fieldErrors, type FormErrors, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor, markFirstRunDone } from "../session.js";

/**
 * The accounts pages (issue #15, point 1): the first run (/setup, while no user exists: creates
 * the owner and signs them in), the profile with the password change (/profile), and an
 * invitation's link (/invitations/<token>: join with the signed-in account, or set a password for
 * a new one). Sign-in and sign-out are the OAuth door's /signin and /signout. The rules are the
 * core's (src/identity/profile.ts, invitations.ts); these pages only translate.
 */

const NOTICES: Record<string, string> = {
  password: "Your password was changed. Your other signed-in browsers were signed out.",
};

const noErrors: FormErrors = { fields: {}, form: null };

export async function registerAccountPages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const signInAs = async (req: FastifyRequest, reply: FastifyReply, userId: string) => {
    await endSession(ctx, sessionIdOf(req));
    const s = await createSession(ctx, userId);
    setSessionCookie(reply, ctx.config.publicUrl, s);
  };

  // --- first run ---

  const setupPage = (
    req: FastifyRequest,
    reply: FastifyReply,
    values: { email?: string },
    errors: FormErrors,
    status = 200,
  ) => page(reply, "accounts/setup", { frame: frameOf(req, reply), values, errors }, status);

  scope.get("/setup", { config: { dashboardPublic: true } }, async (req, reply) => {
    if (await anyUserExists(ctx.stores.db)) return reply.code(303).header("location", "/signin").send();
    return setupPage(req, reply, {}, noErrors);
  });

  scope.post(
    "/setup",
    { config: { dashboardPublic: true }, preHandler: scope.csrfProtection },
    async (req, reply) => {
      const f = formOf(req);
      const email = (f.email ?? "").slice(0, 400);
      try {
        const owner = await createFirstOwner(ctx, {
          email,
          password: f.password ?? "",
          confirm: f.confirm ?? "",
        });
        markFirstRunDone(ctx);
        await signInAs(req, reply, owner.id);
        return reply.code(303).header("location", "/connections").send();
      } catch (err) {
        if (err instanceof ServiceError && err.code === "invalid_input")
          return setupPage(req, reply, { email }, fieldErrors(err), 400);
        throw err;
      }
    },
  );

  // --- profile and password ---

  const profilePage = async (req: FastifyRequest, reply: FastifyReply, errors: FormErrors, status = 200) => {
    const profile = await profileOf(ctx, dashboardActor(req));
    const notice = NOTICES[String((req.query as Record<string, unknown>).notice ?? "")] ?? null;
    return page(reply, "accounts/profile", { frame: frameOf(req, reply, notice), profile, errors }, status);
  };

  scope.get("/profile", async (req, reply) => profilePage(req, reply, noErrors));

  scope.post("/profile/password", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const f = formOf(req);
    try {
      await changePassword(ctx, dashboardActor(req), {
        current: f.current_password ?? "",
        password: f.password ?? "",
        confirm: f.confirm ?? "",
        keepSession: sessionIdOf(req),
      });
    } catch (err) {
      if (err instanceof ServiceError && err.code === "invalid_input")
        return profilePage(req, reply, fieldErrors(err), 400);
      throw err;
    }
    return reply.code(303).header("location", "/profile?notice=password").send();
  });

  // --- invitation links ---

  /** The signed-in user on a public page (the session check does not run there). */
  const signedIn = async (req: FastifyRequest) => {
    const s = await sessionFor(ctx, sessionIdOf(req));
    if (!s) return null;
    req.dashboardUser = {
      email: s.email,
      actor: { type: "user", userId: s.userId, via: "session", permissions: new Set(PERMISSIONS) },
    };
    return s;
  };

  const gonePage = (req: FastifyRequest, reply: FastifyReply, err: ServiceError) => {
    const status = isGoneInvitation(err) ? 410 : statusOfError(err);
    return page(
      reply,
      "accounts/invitation-gone",
      { frame: frameOf(req, reply), status, message: err.message },
      status,
    );
  };

  const invitationPage = async (
    req: FastifyRequest<{ Params: { token: string } }>,
    reply: FastifyReply,
    errors: FormErrors,
    status = 200,
  ) => {
    const token = req.params.token;
    const s = await signedIn(req);
    let invitation;
    try {
      invitation = await invitationForToken(ctx, token);
    } catch (err) {
      if (err instanceof ServiceError && (isGoneInvitation(err) || err.code === "not_found"))
        return gonePage(req, reply, err);
      throw err;
    }
    return page(
      reply,
      "accounts/invitation",
      {
        frame: frameOf(req, reply),
        invitation,
        signedInAs: s?.email ?? null,
        action: `/invitations/${token}`,
        errors,
      },
      status,
    );
  };

  scope.get<{ Params: { token: string } }>(
    "/invitations/:token",
    { config: { dashboardPublic: true } },
    async (req, reply) => invitationPage(req, reply, noErrors),
  );

  scope.post<{ Params: { token: string } }>(
    "/invitations/:token",
    { config: { dashboardPublic: true }, preHandler: scope.csrfProtection },
    async (req, reply) => {
      const token = req.params.token;
      const s = await signedIn(req);
      try {
        if (s) {
          const joined = await acceptInvitation(ctx, dashboardActor(req), token);
          return reply
            .code(303)
            .header("location", `/organizations/${joined.organizationId}?notice=joined`)
            .send();
        }
        const f = formOf(req);
        const made = await acceptInvitationAsNewUser(ctx, token, {
          password: f.password ?? "",
          confirm: f.confirm ?? "",
        });
        markFirstRunDone(ctx);
        await signInAs(req, reply, made.userId);
        return reply
          .code(303)
          .header("location", `/organizations/${made.organizationId}?notice=joined`)
          .send();
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        if (isGoneInvitation(err) || err.code === "not_found") return gonePage(req, reply, err);
        if (err.code === "invalid_input") return invitationPage(req, reply, fieldErrors(err), 400);
        if (err.reason === "account_exists")
          return invitationPage(req, reply, { fields: {}, form: err.message }, 409);
        throw err;
      }
    },
  );
}
