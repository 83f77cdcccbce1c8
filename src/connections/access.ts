import type { Actor } from "../core/actor.js";
import { connectionAccess } from "../identity/visibility.js";
import type { Queryable } from "../stores/relational/types.js";
import { connectionNotFound, noAccess } from "./errors.js";

/** 404 when the connection does not exist, 403 when it exists but the caller cannot see it. */
export async function requireAccess(db: Queryable, p: Actor, id: string): Promise<void> {
  const access = await connectionAccess(db, p, id);
  if (access === "absent") throw connectionNotFound();
  if (access === "forbidden") throw noAccess();
}
