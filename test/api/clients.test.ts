import SwaggerParser from "@apidevtools/swagger-parser";
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import openapiTS, { astToString } from "openapi-typescript";
import t, { type Test } from "tap";
import { testApp } from "../helpers/app.js";
import { seedTenants } from "../helpers/tenants.js";

/**
 * The tools people point at an OpenAPI document, run on the one the server really serves (over
 * HTTP, as a caller fetches it): swagger-parser's validation, Redocly CLI's lint under the
 * rules of redocly.yaml (recommended), and openapi-typescript, whose types then drive the
 * typed client of docs/api.md (examples/typed-client.ts) through `tsc` and against the running server.
 */

const ROOT = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/** A scratch folder inside the checkout, so the example resolves openapi-fetch from node_modules. */
function scratch(t: Test): string {
  mkdirSync(join(ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(ROOT, ".tmp", "typed-client-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const TSCONFIG = {
  compilerOptions: {
    target: "ES2023",
    lib: ["ES2023", "DOM"],
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    types: [],
  },
};

/** `tsc` on the folder: its exit code and what it printed. */
async function typeCheck(dir: string): Promise<{ code: number; output: string }> {
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(TSCONFIG));
  try {
    await run(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", dir]);
    return { code: 0, output: "" };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, output: e.stdout };
  }
}

t.test("real API clients accept the served document and call Vigil through it", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const base = await ta.app.listen({ port: 0, host: "127.0.0.1" });
  const res = await fetch(`${base}/v1/openapi.json`);
  t.equal(res.status, 200);
  const doc = (await res.json()) as Record<string, unknown>;
  const dir = scratch(t);

  await t.test("swagger-parser validates it", async (t) => {
    await t.resolves(SwaggerParser.validate(structuredClone(doc) as never), "valid OpenAPI 3.1");
  });

  await t.test("Redocly CLI lints it with no error and no warning", async (t) => {
    const file = join(dir, "openapi.json");
    writeFileSync(file, JSON.stringify(doc));
    const cli = join(ROOT, "node_modules/@redocly/cli/bin/cli.js");
    const args = [cli, "lint", file, "--config", join(ROOT, "redocly.yaml"), "--format=json"];
    const out = await run(process.execPath, args, {
      env: { ...process.env, REDOCLY_TELEMETRY: "off" },
    }).catch((e: { stdout: string }) => e);
    const report = JSON.parse(out.stdout) as {
      totals: { errors: number; warnings: number; ignored: number };
      problems: { ruleId: string; message: string }[];
    };
    const problems = report.problems.map((p) => `${p.ruleId}: ${p.message}`).join("\n");
    t.equal(report.totals.errors, 0, `no errors${problems ? `\n${problems}` : ""}`);
    t.equal(report.totals.warnings, 0, "no warnings");
    t.equal(report.totals.ignored, 0, "none ignored");
  });

  await t.test("openapi-typescript generates types, and the typed example compiles and runs", async (t) => {
    const types = astToString(await openapiTS(doc as never));
    t.match(types, /"\/v1\/connections": \{/, "the paths are typed");
    t.match(types, /JsonValue:/, "the configuration's JSON value is a named type");
    writeFileSync(join(dir, "vigil-api.d.ts"), types);
    copyFileSync(join(ROOT, "examples/typed-client.ts"), join(dir, "typed-client.ts"));

    const ok = await typeCheck(dir);
    t.equal(ok.code, 0, `tsc accepts the example against the generated types\n${ok.output}`);

    // the types bite: a mistyped call does not compile
    const source = readFileSync(join(dir, "typed-client.ts"), "utf8");
    writeFileSync(join(dir, "typed-client.ts"), source.replace("limit: 10 }", 'limit: "ten" }'));
    const bad = await typeCheck(dir);
    t.not(bad.code, 0, "a string where the document says integer fails to compile");
    t.match(bad.output, /typed-client\.ts/, "and tsc names the line");
    writeFileSync(join(dir, "typed-client.ts"), source);

    const example = (await import(join(dir, "typed-client.ts"))) as {
      tour(baseUrl: string, apiKey: string): Promise<Record<string, unknown>>;
    };
    const tour = await example.tour(base, w.keys.alicePersonal);
    t.match(tour.connectionId, /^[0-9a-f-]{36}$/, "a connection was created");
    t.equal(tour.listed, true, "and listed");
    t.equal(tour.availabilitySamples, 0, "a new gateway has no samples yet");
    t.equal(tour.usageRecorded, 2, "two usage entries recorded");
    t.equal(tour.totalCostCents, 5.5, "and their cost read back");
  });
});
