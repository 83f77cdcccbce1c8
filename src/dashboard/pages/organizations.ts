import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../core/context.js";

/** The dashboard's organizations pages (not built yet). */
export async function registerOrganizationPages(_scope: FastifyInstance, _ctx: AppContext): Promise<void> {}
