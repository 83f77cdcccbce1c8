import t from "tap";
import { z } from "zod";
import { Components } from "../../src/http/openapi.js";
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
      const url = path.replace(/\{(\w+)\}/g, ":$1");
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
  type Schema = { type?: string; anyOf?: unknown; $ref?: string };
  type Answer = { $ref?: string; content?: Record<string, { schema?: Schema }> };
  type Op = { responses: Record<string, Answer> };
  // a shared answer or body is a reference into the components; follow it
  const deref = <T>(v: T & { $ref?: string }, where: "responses" | "schemas"): T =>
    v.$ref ? doc.components[where][v.$ref.replace(`#/components/${where}/`, "")] : v;
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, Op>>)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, answer] of Object.entries(op.responses)) {
        const body = deref(answer, "responses").content?.["application/json"]?.schema;
        const schema = body && deref(body, "schemas");
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
  const named = (ref: string) => doc.components.schemas[ref.replace("#/components/schemas/", "")];
  t.same(Object.keys(named(get["403"].content["application/json"].schema.$ref).properties).sort(), [
    "error",
    "validation_errors",
  ]);
  t.same(named(get["401"].content["application/json"].schema.$ref).properties.success, {
    type: "boolean",
    const: false,
  });
  t.ok(doc.paths["/v1/gateway/ingest"].post.responses["413"], "the heartbeat's 413 is documented");
});

t.test("statuses answered before a route runs are documented once and named by every route", async (t) => {
  const { app } = await testApp(t);
  const doc = (await app.inject({ method: "GET", url: "/v1/openapi.json" })).json();
  const shared = doc.components.responses as Record<string, { description: string }>;
  for (const [path, ops] of Object.entries(
    doc.paths as Record<string, Record<string, { responses: Record<string, { $ref?: string }> }>>,
  ))
    for (const [method, op] of Object.entries(ops)) {
      const pre = method === "get" ? ["405", "414", "431"] : ["405", "413", "414", "415", "431"];
      for (const status of pre) {
        const ref = op.responses[status]?.$ref;
        t.ok(
          ref && shared[ref.replace("#/components/responses/", "")],
          `${method.toUpperCase()} ${path} names its ${status}`,
        );
      }
    }
  // the connections API answers in its own `{error}` body, the others in the envelope
  t.equal(
    doc.paths["/v1/connections"].post.responses["415"].$ref,
    "#/components/responses/UnsupportedMediaTypeSimple",
  );
  t.equal(doc.paths["/v1/usage"].post.responses["415"].$ref, "#/components/responses/UnsupportedMediaType");
  t.equal(doc.paths["/v1/connections"].get.responses["431"].$ref, "#/components/responses/HeadersTooLarge");
});

t.test("shared schemas are named components, never references into a request's own $defs", async (t) => {
  const { app } = await testApp(t);
  const text = (await app.inject({ method: "GET", url: "/v1/openapi.json" })).body;
  t.notMatch(text, /#\/\$defs\//, "no reference points at $defs");
  t.notMatch(text, /"\$defs"/, "no schema keeps its own $defs");
  const doc = JSON.parse(text);
  const create = doc.paths["/v1/connections"].post.requestBody.content["application/json"].schema;
  t.same(create.properties.configuration, { $ref: "#/components/schemas/JsonValue" });
  t.match(doc.components.schemas.JsonValue, { description: /Any JSON value/ }, "one named schema");
  const limit = doc.paths["/v1/connections"].get.parameters.find((p: { name: string }) => p.name === "limit");
  t.same(
    limit.schema,
    { type: "integer", minimum: 1, maximum: 100, default: 50 },
    "whole-number parameters are integers",
  );
});

t.test("Components: recursion lands in components/schemas; an unnamed one is refused", async (t) => {
  type Tree = { name: string; children: Tree[] };
  const tree: z.ZodType<Tree> = z
    .lazy(() => z.object({ name: z.string(), children: z.array(tree) }))
    .meta({ id: "TestTree" });
  const c = new Components();
  const body = c.schema(z.object({ root: tree, spare: tree.nullable() }), "input");
  t.same(body.properties?.root, { $ref: "#/components/schemas/TestTree" }, "the use is a reference");
  t.same(
    (c.schemas.TestTree as { properties: { children: unknown } }).properties.children,
    { type: "array", items: { $ref: "#/components/schemas/TestTree" } },
    "and the definition refers to itself in the components",
  );
  t.same(c.schema(tree, "input"), { $ref: "#/components/schemas/TestTree" }, "a second use shares it");

  type Loop = { next: Loop | null };
  const loop: z.ZodType<Loop> = z.lazy(() => z.object({ next: loop.nullable() }));
  t.throws(
    () => c.schema(z.object({ loop }), "input"),
    /recursive schema has no id.*\.meta\(\{ id/,
    "no id: refused, saying what to do",
  );
  const root: z.ZodType<Loop> = z.object({ next: z.lazy(() => root).nullable() });
  t.throws(
    () => c.schema(root, "input"),
    /refers to #,.*\.meta\(\{ id/,
    "a recursive root without an id: refused",
  );
  // one id, two forms: what a request may leave out (a default) an answer always has
  const counted = z.object({ n: z.number().default(1) }).meta({ id: "TestCounted" });
  t.same(c.schema(counted, "output"), { $ref: "#/components/schemas/TestCounted" });
  t.same(
    c.schema(counted, "input"),
    { $ref: "#/components/schemas/TestCountedInput" },
    "the request form is named apart",
  );
  t.same((c.schemas.TestCounted as { required?: string[] }).required, ["n"]);
  t.equal((c.schemas.TestCountedInput as { required?: string[] }).required, undefined);
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
