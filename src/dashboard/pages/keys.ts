import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../core/context.js";

/** The dashboard's keys pages (not built yet). */
export async function registerKeyPages(_scope: FastifyInstance, _ctx: AppContext): Promise<void> {}
