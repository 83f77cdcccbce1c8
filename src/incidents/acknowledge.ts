import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { conflict, invalidInput, notFound } from "../core/errors.js";
import { acknowledgeIncident, actorRef } from "./incidents.js";
import { getIncident, type Incident, requireIncident } from "./list.js";
import { lockIncident } from "./repository.js";

/** The longest note an acknowledgement keeps. */
export const ACK_NOTE_MAX = 1000;

/**
 * A person acknowledges an incident (POST /v1/incidents/{id}/acknowledge): open -> acknowledged,
 * recording who (the actor: key and user, or a signed-in user) and their note in the timeline.
 * 404 for an unknown incident, 403 for one of a connection the actor may not see, 409 for a
 * resolved one. Acknowledging an acknowledged incident changes nothing and answers it as it is
 * (a retried request is safe; the first acknowledgement and its note stand).
 */
export async function acknowledge(
  ctx: AppContext,
  actor: Actor,
  input: { incidentId: string; note?: string | null },
): Promise<Incident> {
  const note = input.note ?? null;
  if (note !== null && note.length > ACK_NOTE_MAX)
    throw invalidInput("body.note", `must be at most ${ACK_NOTE_MAX} characters`);
  const db = ctx.stores.db;
  await requireIncident(db, actor, input.incidentId);
  const at = ctx.now();
  await db.transaction(async (tx) => {
    const status = await lockIncident(tx, input.incidentId);
    if (!status) throw notFound(`Incident ${input.incidentId} not found`);
    if (status === "resolved")
      throw conflict(
        `Incident ${input.incidentId} is already resolved; only an open incident can be acknowledged`,
      );
    if (status === "acknowledged") return;
    await acknowledgeIncident(tx, { incidentId: input.incidentId, by: actorRef(actor), note, at });
  });
  return getIncident(ctx, actor, input.incidentId);
}
