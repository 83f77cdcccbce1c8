import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../core/context.js";

/** The dashboard's usage pages (not built yet). */
export async function registerUsagePages(_scope: FastifyInstance, _ctx: AppContext): Promise<void> {}
