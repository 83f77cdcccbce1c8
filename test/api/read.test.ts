import { randomUUID } from "node:crypto";
import t from "tap";
import { availabilitySamples, executions } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`read API on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    const { app, ctx } = ta;
    const w = await seedTenants(ta);
    const key = w.keys.alicePersonal;
    const { PA, OA, PC } = w.conns;
    const now = Date.now() - 60_000;
    const sample = (id: string, i: number, available: boolean, synthetic = false) => ({
      ts: new Date(now - i * 1000),
      connection_id: id,
      available,
      response_time_ms: synthetic ? null : 100 + i,
      synthetic,
      source: synthetic ? "gap_fill" : "probe",
      ...(available ? {} : { reason: "timeout", error: "no answer" }),
    });
    const rows = [];
    for (let i = 0; i < 30; i++) rows.push(sample(PA, i, i % 5 !== 0), sample(OA, i, true, i % 10 === 0));
    for (let i = 0; i < 5; i++) rows.push(sample(PC, i, true));
    await ctx.stores.series.append(availabilitySamples, rows);
    await ctx.stores.series.waitVisible();

    // every visible row once, newest first, through cursors; rows arriving meanwhile neither repeat nor shift it
    const seen: { connection_id: string; checked_at: string }[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await call(app, key, "GET", `/v1/availability?limit=7${cursor ? `&cursor=${cursor}` : ""}`);
      t.equal(r.statusCode, 200, r.body);
      const b = r.json();
      t.equal(b.pagination.limit, 7);
      seen.push(...b.data);
      cursor = b.pagination.next_cursor;
      t.equal(b.pagination.has_more, cursor !== null);
      if (pages++ === 0) {
        await ctx.stores.series.append(availabilitySamples, [sample(PA, -5, true)]);
        await ctx.stores.series.waitVisible();
      }
    } while (cursor);
    t.equal(seen.length, 60, "alice sees her 30 + org A's 30, each once");
    t.equal(new Set(seen.map((s) => `${s.connection_id}${s.checked_at}`)).size, 60);
    t.notOk(
      seen.some((s) => s.connection_id === PC),
      "never another tenant's",
    );
    t.match(
      seen.find((s) => s.connection_id === PA),
      { connection_id: PA, checked_at: String, available: Boolean, synthetic: false, source: "probe" },
    );

    const down = (
      await call(app, key, "GET", `/v1/availability?connection_id=${PA}&is_available=false`)
    ).json();
    t.equal(down.data.length, 6);
    t.ok(
      down.data.every((s: { available: boolean; reason: string }) => !s.available && s.reason === "timeout"),
    );
    const real = (
      await call(app, key, "GET", `/v1/availability?connection_id=${OA}&include_synthetic=false&limit=1000`)
    ).json();
    t.equal(real.data.length, 27, "include_synthetic=false drops gap-fill samples");
    const bounded = (
      await call(
        app,
        key,
        "GET",
        `/v1/availability?connection_id=${PA}&since=${new Date(now - 9_500).toISOString()}&until=${new Date(now + 1).toISOString()}`,
      )
    ).json();
    t.equal(bounded.data.length, 10, "since inclusive, until exclusive");

    // cursors are tamper-evident and bound to their query
    const first = (await call(app, key, "GET", `/v1/availability?connection_id=${PA}&limit=2`)).json();
    const c = first.pagination.next_cursor as string;
    const forged = `${c.slice(0, 5)}${c[5] === "A" ? "B" : "A"}${c.slice(6)}`;
    for (const [name, url] of [
      ["forged", `/v1/availability?connection_id=${PA}&cursor=${forged}`],
      ["garbage", `/v1/availability?connection_id=${PA}&cursor=hello`],
      ["another query's", `/v1/availability?connection_id=${OA}&cursor=${c}`],
      ["another endpoint's", `/v1/executions?connection_id=${PA}&cursor=${c}`],
    ] as const) {
      const r = await call(app, key, "GET", url);
      t.equal(r.statusCode, 400, name);
      t.match(r.json().error, { code: "INVALID_CURSOR", message: /^cursor: / }, name);
    }

    // executions: rows, error details, per-workflow aggregates
    const ex = (id: string, n: number, status: string, wf: string, dur: number | null) => ({
      ts: new Date(now - n * 1000),
      connection_id: id,
      execution_id: `e${n}`,
      workflow_id: wf,
      status,
      duration_ms: dur,
      error: status === "error" ? "node X failed" : null,
      updated_at: new Date(),
    });
    await ctx.stores.series.append(executions, [
      ex(PA, 1, "success", "wf1", 100),
      ex(PA, 2, "success", "wf1", 300),
      ex(PA, 3, "error", "wf1", 200),
      ex(PA, 4, "running", "wf2", null),
      ex(PC, 5, "success", "wf9", 10),
    ]);
    await ctx.stores.series.waitVisible();
    const plain = (await call(app, key, "GET", "/v1/executions")).json();
    t.equal(plain.data.length, 4);
    t.notOk("error" in plain.data[0], "no error details unless asked");
    const errs = (
      await call(app, key, "GET", "/v1/executions?status=error&include_error_details=true")
    ).json();
    t.same(
      errs.data.map((e: { error: string }) => e.error),
      ["node X failed"],
    );
    const grouped = (await call(app, key, "GET", "/v1/executions?group_by=workflow")).json();
    t.same(grouped.data, [
      {
        connection_id: PA,
        workflow_id: "wf1",
        workflow_name: null, // no name read from the platform in this test
        runs: 3,
        successes: 2,
        errors: 1,
        success_rate: 0.6667,
        avg_duration_ms: 200,
      },
      {
        connection_id: PA,
        workflow_id: "wf2",
        workflow_name: null,
        runs: 1,
        successes: 0,
        errors: 0,
        success_rate: 0,
        avg_duration_ms: null,
      },
    ]);

    // summary
    const summary = (await call(app, key, "GET", "/v1/availability/summary?window=day")).json();
    const pa = summary.data.find((s: { connection_id: string }) => s.connection_id === PA);
    t.match(pa, { window: "day", checks: 31, available_checks: 25, uptime_percent: 80.645 });
    t.notOk(summary.data.some((s: { connection_id: string }) => s.connection_id === PC));

    // aggregates page with real cursors wherever has_more can be true
    const byWorkflow: string[] = [];
    let wfCursor: string | null = null;
    for (let i = 0; i < 5; i++) {
      const page: {
        data: { workflow_id: string }[];
        pagination: { next_cursor: string | null; has_more: boolean };
      } = (
        await call(
          app,
          key,
          "GET",
          `/v1/executions?group_by=workflow&limit=1${wfCursor ? `&cursor=${wfCursor}` : ""}`,
        )
      ).json();
      byWorkflow.push(...page.data.map((g: { workflow_id: string }) => g.workflow_id));
      wfCursor = page.pagination.next_cursor;
      t.equal(page.pagination.has_more, wfCursor !== null, "has_more exactly when a cursor continues");
      if (!wfCursor) break;
    }
    t.same(byWorkflow, ["wf1", "wf2"], "per-workflow aggregates, one a page, busiest first, each once");
    const sums: string[] = [];
    let sumCursor: string | null = null;
    for (let i = 0; i < 5; i++) {
      const page: {
        data: { connection_id: string }[];
        pagination: { next_cursor: string | null; has_more: boolean };
      } = (
        await call(
          app,
          key,
          "GET",
          `/v1/availability/summary?window=week&limit=1${sumCursor ? `&cursor=${sumCursor}` : ""}`,
        )
      ).json();
      sums.push(...page.data.map((s: { connection_id: string }) => s.connection_id));
      sumCursor = page.pagination.next_cursor;
      t.equal(page.pagination.has_more, sumCursor !== null);
      if (!sumCursor) break;
    }
    t.same(sums, [PA, OA].sort(), "the summary pages by connection id");
    const narrowed = (
      await call(
        app,
        key,
        "GET",
        `/v1/availability/summary?connection_id=${PA}&since=${new Date(now - 9_500).toISOString()}`,
      )
    ).json();
    t.match(narrowed.data, [{ connection_id: PA, checks: 11 }], "since narrows the day window");
    const wrongCursor = await call(
      app,
      key,
      "GET",
      `/v1/availability/summary?window=month&cursor=${sumCursor ?? "x.y"}`,
    );
    t.equal(wrongCursor.statusCode, 400, "an invalid cursor is a 400");
    const foreign = await call(
      app,
      key,
      "GET",
      `/v1/executions?group_by=workflow&cursor=${first.pagination.next_cursor}`,
    );
    t.equal(foreign.statusCode, 400, "another endpoint's cursor is a 400 here too");

    // incidents with their timeline
    const incidentId = randomUUID();
    await ctx.stores.db.query(
      "INSERT INTO incidents (id, connection_id, kind, status, title, opened_at) VALUES ($1, $2, 'availability', 'open', 'down', now())",
      [incidentId, PA],
    );
    await ctx.stores.db.query(
      "INSERT INTO incident_events (id, incident_id, at, kind, detail) VALUES ($1, $2, now(), 'opened', '{\"failures\":3}')",
      [randomUUID(), incidentId],
    );
    await ctx.stores.db.query(
      "INSERT INTO incidents (id, connection_id, kind, status, title, opened_at) VALUES ($1, $2, 'availability', 'open', 'x', now())",
      [randomUUID(), PC],
    );
    const inc = (await call(app, key, "GET", "/v1/incidents")).json();
    t.equal(inc.data.length, 1, "another tenant's incident is not listed");
    t.match(inc.data[0], {
      id: incidentId,
      connection_id: PA,
      kind: "availability",
      status: "open",
      events: [{ kind: "opened", detail: { failures: 3 } }],
    });

    // bad parameters: 400 naming the parameter
    for (const [url, message] of [
      ["/v1/availability?limit=1001", /query\.limit: must be at most 1000/],
      ["/v1/availability?limit=0", /query\.limit: must be at least 1/],
      [
        "/v1/availability?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z",
        /query\.since: must not be after until/,
      ],
      ["/v1/availability?since=yesterday", /query\.since: must be an ISO 8601/],
      ["/v1/availability?is_available=maybe", /query\.is_available: must be true or false/],
      [
        "/v1/executions?status=exploded",
        /query\.status: must be one of running, success, error, waiting, cancelled/,
      ],
      ["/v1/executions?group_by=day", /query\.group_by: must be workflow/],
      ["/v1/availability/summary?window=year", /query\.window: must be day, week or month/],
      ["/v1/incidents?colour=red", /query\.colour: is not a known field/],
    ] as const) {
      const r = await call(app, key, "GET", url);
      t.equal(r.statusCode, 400, url);
      t.match(r.json().error.message, message, url);
    }
    t.equal(
      (await call(app, w.keys.carolPersonal, "GET", `/v1/availability?connection_id=${PA}`)).statusCode,
      403,
    );
    t.equal(
      (await call(app, w.keys.aliceReadOnly, "GET", "/v1/availability")).statusCode,
      403,
      "needs analytics:read",
    );
    // a foreign or unknown connection is told before a refused cursor, as it always was
    for (const path of ["/v1/availability", "/v1/executions", "/v1/anomalies"]) {
      const foreign = await call(
        app,
        w.keys.carolPersonal,
        "GET",
        `${path}?connection_id=${PA}&cursor=hello`,
      );
      t.equal(foreign.statusCode, 403, `${path}: foreign connection before the cursor`);
      const unknown = await call(app, key, "GET", `${path}?connection_id=${randomUUID()}&cursor=hello`);
      t.equal(unknown.statusCode, 404, `${path}: unknown connection before the cursor`);
    }
  });
}
