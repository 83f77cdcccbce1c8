import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../core/context.js";

/** The dashboard's accounts pages (not built yet). */
export async function registerAccountPages(_scope: FastifyInstance, _ctx: AppContext): Promise<void> {}
