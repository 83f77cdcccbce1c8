import t from "tap";
import { testApp } from "../helpers/app.js";

t.test("/v1/openapi.json describes every route from the validating schemas", async (t) => {
  const { app } = await testApp(t);
  const res = await app.inject({ method: "GET", url: "/v1/openapi.json" });
  t.equal(res.statusCode, 200);
  const doc = res.json();
  t.equal(doc.openapi, "3.1.0");
  for (const path of [
    "/v1/connections",
    "/v1/connections/{id}",
    "/v1/usage",
    "/v1/gateway/ingest",
    "/v1/analytics",
    "/v1/executions",
    "/v1/availability",
    "/v1/availability/summary",
    "/v1/incidents",
    "/v1/anomalies",
  ]) {
    t.ok(doc.paths[path], `${path} is described`);
  }
  // every operation described is one the server serves
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const method of Object.keys(ops)) {
      const url = path.replace("{id}", ":id");
      t.ok(
        app.hasRoute({ method: method.toUpperCase() as "GET", url }),
        `${method.toUpperCase()} ${path} is served`,
      );
    }
  }
  const list = doc.paths["/v1/connections"].get;
  const limit = list.parameters.find((p: { name: string }) => p.name === "limit");
  t.ok(limit, "query parameters come from the schema");
  const create = doc.paths["/v1/connections"].post.requestBody.content["application/json"].schema;
  t.same(create.properties.service_type.enum, ["workflow_a", "workflow_b", "gateway"]);
  t.same(create.required.sort(), ["service_name", "service_type"]);
  t.equal(
    doc.paths["/v1/analytics"].get.parameters.find((p: { name: string }) => p.name === "metric_type")
      .required,
    true,
  );
  t.equal(doc.paths["/v1/gateway/ingest"].post["x-permission"], "usage-ingestion");
});

t.test("every 200/201 in the document describes its body; errors carry theirs", async (t) => {
  const { app } = await testApp(t);
  const doc = (await app.inject({ method: "GET", url: "/v1/openapi.json" })).json();
  type Op = { responses: Record<string, { content?: Record<string, { schema?: { type?: string } }> }> };
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, Op>>)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, answer] of Object.entries(op.responses)) {
        const schema = answer.content?.["application/json"]?.schema;
        t.ok(
          schema?.type ?? (schema as { anyOf?: unknown } | undefined)?.anyOf,
          `${method} ${path} ${status} has a body schema`,
        );
      }
      if (path.startsWith("/v1/")) {
        t.ok(op.responses["401"], `${method} ${path} documents 401`);
        t.ok(op.responses["403"], `${method} ${path} documents 403`);
        t.ok(op.responses["429"], `${method} ${path} documents 429`);
      }
    }
  }
  t.ok(doc.paths["/healthz"].get, "health probes are in the table too");
  t.same(doc.paths["/readyz"].get.security, [], "and public");
  const get = doc.paths["/v1/connections/{id}"].get.responses;
  t.same(Object.keys(get["403"].content["application/json"].schema.properties).sort(), [
    "error",
    "validation_errors",
  ]);
  t.same(get["401"].content["application/json"].schema.properties.success, { type: "boolean", const: false });
  t.ok(doc.paths["/v1/gateway/ingest"].post.responses["413"], "the heartbeat's 413 is documented");
});

t.test("/docs serves the interactive reference of the same document, without a CDN", async (t) => {
  const { app } = await testApp(t);
  const page = await app.inject({ method: "GET", url: "/docs" });
  t.equal(page.statusCode, 200);
  t.match(page.headers["content-type"], /text\/html/);
  t.match(page.body, /swagger-initializer\.js/, "the page loads the initializer");
  t.notMatch(page.body, /<script[^>]+src="https?:/, "scripts come from this server");
  const init = await app.inject({ method: "GET", url: "/docs/static/swagger-initializer.js" });
  t.equal(init.statusCode, 200);
  t.match(init.body, /\.\/json/, "which points the UI at the document");
  const served = await app.inject({ method: "GET", url: "/docs/json" });
  const doc = await app.inject({ method: "GET", url: "/v1/openapi.json" });
  t.same(served.json().paths, doc.json().paths, "the document /docs shows is /v1/openapi.json");
  const bundle = await app.inject({ method: "GET", url: "/docs/static/swagger-ui-bundle.js" });
  t.equal(bundle.statusCode, 200, "assets are served from the package");
});
