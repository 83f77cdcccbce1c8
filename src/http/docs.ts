import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";

/**
 * /docs: the interactive API reference (Swagger UI), fed the document generated from the route
 * table (`@fastify/swagger` in static mode, so it does not collect routes a second time). The
 * UI's scripts and styles are served from the package, never from a CDN, so /docs works offline
 * and behind a strict Content-Security-Policy.
 */
export async function registerDocs(app: FastifyInstance, document: Record<string, unknown>): Promise<void> {
  await app.register(swagger, { mode: "static", specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: "/docs" });
}
