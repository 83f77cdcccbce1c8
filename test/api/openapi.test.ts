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
