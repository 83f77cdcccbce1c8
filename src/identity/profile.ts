import { createHash } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { invalidInput, notFound, ServiceError } from "../core/errors.js";
import { AccountError, createUser } from "./accounts.js";
import {
  countUsers,
  deleteOtherSessions,
  lockFirstRun,
  setPasswordHash,
  transactionAsStore,
  userAccount,
} from "./invitations-repository.js";
import { checkEmail, checkNewPassword, PASSWORD_MAX } from "./invitations.js";
import { personOf } from "./organizations.js";
import { hashPassword, verifyPassword } from "./passwords.js";
import type { Plan } from "./plans.js";

/**
 * A person's own account: the first run of an install (the owner, created while no user exists)
 * and the password. Transport-free, like every core verb; the dashboard calls these.
 */

/** The plan of the first owner: a self-hosted install has no billing. */
export const FIRST_OWNER_PLAN: Plan = "enterprise";

export interface Profile {
  id: string;
  email: string;
  plan: Plan;
  createdAt: string;
  hasPassword: boolean;
}

export async function profileOf(ctx: AppContext, actor: Actor): Promise<Profile> {
  const me = await userAccount(ctx.stores.db, personOf(actor));
  if (!me) throw notFound("your account no longer exists");
  return {
    id: me.id,
    email: me.email,
    plan: me.plan,
    createdAt: new Date(me.created_at).toISOString(),
    hasPassword: !!me.password_hash,
  };
}

/**
 * The first run: creates the owner of the install (plan `enterprise`) with an e-mail and a
 * password, only while no user exists. Concurrent set-ups take turns on a lock and re-check, so
 * two of them never create two owners: the second gets `conflict` (reason `already_set_up`).
 */
export async function createFirstOwner(
  ctx: AppContext,
  input: { email: string; password: string; confirm: string },
): Promise<{ id: string; email: string; plan: Plan }> {
  const email = checkEmail(input.email);
  checkNewPassword(input.password, input.confirm);
  const db = ctx.stores.db;
  if ((await countUsers(db)) > 0) throw alreadySetUp();
  return db.transaction(async (tx) => {
    await lockFirstRun(tx);
    if ((await countUsers(tx)) > 0) throw alreadySetUp();
    try {
      return await createUser(transactionAsStore(db, tx), {
        email,
        password: input.password,
        plan: FIRST_OWNER_PLAN,
      });
    } catch (err) {
      if (err instanceof AccountError) throw invalidInput("email", err.message.replace(/^--email:\s*/, ""));
      throw err;
    }
  });
}

const alreadySetUp = () =>
  new ServiceError("conflict", "Vigil is set up already: its owner exists. Sign in instead.", {
    reason: "already_set_up",
  });

const sha256 = (s: string) => createHash("sha256").update(s).digest("base64url");

/**
 * Changes the actor's password: the current one must be right (`invalid_input` on
 * `current_password` otherwise, nothing changed), the new one at least 8 characters and
 * confirmed. The user's other browser sessions end (`keepSession`: the id of the one in use).
 */
export async function changePassword(
  ctx: AppContext,
  actor: Actor,
  input: { current: string; password: string; confirm: string; keepSession?: string },
): Promise<{ otherSessionsEnded: number }> {
  const userId = personOf(actor);
  if (input.current.length > PASSWORD_MAX) throw invalidInput("current_password", "is not right");
  checkNewPassword(input.password, input.confirm);
  const me = await userAccount(ctx.stores.db, userId);
  if (!me) throw notFound("your account no longer exists");
  if (!me.password_hash || !(await verifyPassword(input.current, me.password_hash)))
    throw invalidInput("current_password", "is not right; nothing was changed");
  if (input.current === input.password)
    throw invalidInput("password", "is the password you have now; choose another (nothing was changed)");
  const hash = await hashPassword(input.password);
  return ctx.stores.db.transaction(async (tx) => {
    await setPasswordHash(tx, userId, hash);
    const ended = await deleteOtherSessions(tx, userId, input.keepSession ? sha256(input.keepSession) : null);
    return { otherSessionsEnded: ended };
  });
}
