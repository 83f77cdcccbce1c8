import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../core/context.js";

/** The dashboard's connections pages (not built yet). */
export async function registerConnectionPages(_scope: FastifyInstance, _ctx: AppContext): Promise<void> {}
