import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../core/context.js";

/** The dashboard's incidents pages (not built yet). */
export async function registerIncidentPages(_scope: FastifyInstance, _ctx: AppContext): Promise<void> {}
