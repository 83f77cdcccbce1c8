import t from "tap";
import { runBudgetChecks } from "../../src/budgets/job.js";
import { addMember } from "../../src/identity/accounts.js";
import { budgetsJob } from "../../src/jobs/jobs.js";
import { runJob } from "../../src/jobs/runner.js";
import { call } from "../helpers/tenants.js";
import { BACKENDS, budgetWorld } from "./fixtures/world.js";

/**
 * The budget job with the clock from the context, on every backend: warnings at 50, 80 and 100%
 * exactly once per month, the projected overrun, the `budget` incident opened at 100% and
 * resolved when the budget is raised or removed and at the next month; account budgets.
 */
for (const [relational, series] of BACKENDS) {
  t.test(`a connection budget through a month and into the next (${relational}, ${series})`, async (t) => {
    const bw = await budgetWorld(t, relational, series);
    if (!bw) return;
    const { app, w, ctx } = bw;
    const { PA } = w.conns;
    const alice = w.keys.alicePersonal;
    // 27 of November's 30 days gone: the run rate adds a ninth (a minute more each step)
    let minute = 0;
    const step = () =>
      bw.setNow(new Date(Date.parse("2026-11-28T00:00:00Z") + ++minute * 60_000).toISOString());
    const subjects = async () => (await bw.mails(PA)).map((m) => m.subject);
    const run = () => runBudgetChecks(ctx);
    const warn = (what: string) => `[Vigil] alice n8n ${what}`;
    const expected: string[] = [];
    const expectMails = async (added: string[], what: string) => {
      expected.push(...added);
      t.same(await subjects(), expected, what);
    };

    step();
    const put = await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: 100 });
    t.equal(put.statusCode, 200);
    step();
    t.match(await run(), { evaluated: 1, warned: 0, opened: 0 }, "nothing spent: nothing to say");

    step();
    await bw.entry(PA, 4_000); // $40: 40%, projected 44.4
    await run();
    await expectMails([], "below 50%: no warning");

    step();
    await bw.entry(PA, 1_500); // $55
    t.match(await run(), { warned: 1 });
    await expectMails([warn("has used 50% of its monthly budget")], "50%");
    step();
    t.match(await run(), { warned: 0 }, "again: nothing");
    await expectMails([], "the 50% warning is sent once");

    step();
    await bw.entry(PA, 3_000); // $85: projected 94.4
    await run();
    await expectMails([warn("has used 80% of its monthly budget")], "80%");

    step();
    await bw.entry(PA, 1_000); // $95: projected 105.5, over the budget before the month ends
    await run();
    await expectMails([warn("is on course to exceed its monthly budget")], "the projected overrun");
    step();
    await run();
    await expectMails([], "the projection is sent once");
    t.same(await bw.incidents(PA), [], "no incident below 100%");

    step();
    await bw.entry(PA, 500); // $100: 100%
    t.match(await run(), { opened: 1 });
    await expectMails([warn("is over its monthly budget")], "100%: one e-mail, the incident's");
    const [first] = await bw.incidents(PA);
    t.match(first, { status: "open", title: "alice n8n is over its monthly budget (2026-11)" });
    const mails = await bw.mails(PA);
    t.equal(mails.at(-1)?.incident_id, first?.id, "the 100% warning is tied to the incident");
    t.equal(mails.at(-1)?.kind, "budget_warning");
    t.equal(mails.at(-1)?.recipient, "alice@a.example", "a personal connection's owner is told");
    step();
    t.match(await run(), { warned: 0, opened: 0, resolved: 0 }, "again: nothing");
    await expectMails([], "100% once");

    // raising the budget above the spend resolves the incident at once
    step();
    const raised = await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: 200 });
    t.match(raised.json(), { monthly_budget_usd: 200, spent_usd: 100, percent_used: 50 });
    t.match(await bw.incidents(PA), [{ id: first?.id, status: "resolved" }]);
    await expectMails([warn("is no longer over budget")], "the recovery e-mail");
    t.equal((await bw.mails(PA)).at(-1)?.kind, "recovery");
    step();
    await run();
    await expectMails([], "50% of the new budget: already warned this month");

    // over the raised budget: a new incident, its e-mail only
    step();
    await bw.entry(PA, 10_000); // $200
    t.match(await run(), { opened: 1 });
    await expectMails([warn("is over its monthly budget")], "over again: the incident's e-mail");
    const second = (await bw.incidents(PA))[1];
    t.equal(second?.status, "open");

    // alice's account budget is over too, and its incident is the same connection's: one incident
    step();
    const account = await call(app, alice, "PUT", "/v1/budget", { monthly_budget_usd: 150 });
    t.match(account.json(), { account_type: "user", spent_usd: 200, percent_used: 133.33 });
    await expectMails(
      [
        "[Vigil] account alice@a.example has used 50% of its monthly budget",
        "[Vigil] account alice@a.example has used 80% of its monthly budget",
        "[Vigil] account alice@a.example is over its monthly budget",
      ],
      "set below the spend: an alert for each threshold, the 100% one on its own (the incident was open)",
    );
    t.equal((await bw.mails(PA)).at(-1)?.incident_id, second?.id);
    t.equal((await bw.incidents(PA)).length, 2, "no second incident");
    step();
    await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: null });
    t.equal((await bw.incidents(PA))[1]?.status, "open", "the account's budget still holds the incident");
    await expectMails([], "no e-mail");

    // the next month resolves it
    bw.setNow("2026-12-01T00:05:00Z");
    t.match(await runJob(ctx, budgetsJob), true, "the job runs in the runner, under its lock");
    t.same(
      (await bw.incidents(PA)).map((i) => i.status),
      ["resolved", "resolved"],
      "resolved at the next month",
    );
    await expectMails(["[Vigil] account alice@a.example is no longer over budget"], "one recovery e-mail");
    const resolvedEvent = await ctx.stores.db.query<{ detail: { reason: string } }>(
      "SELECT detail FROM incident_events WHERE incident_id = $1 AND kind = 'resolved'",
      [second?.id],
    );
    t.match(resolvedEvent.rows[0]?.detail, { reason: "new_month", month: "2026-12" });

    // December: warnings again; setting a budget already half spent warns at once
    bw.setNow("2026-12-01T00:10:00Z");
    await bw.entry(PA, 10_000); // $100
    const december = await call(app, alice, "PUT", `/v1/connections/${PA}/budget`, {
      monthly_budget_usd: 200,
    });
    t.match(december.json(), { month: "2026-12", percent_used: 50 });
    await expectMails([warn("has used 50% of its monthly budget")], "a new month, a new 50% warning");
    bw.setNow("2026-12-01T00:15:00Z");
    await run();
    // the account: $100 of $150; within the month's first day no projection is trusted
    await expectMails(
      ["[Vigil] account alice@a.example has used 50% of its monthly budget"],
      "the account's 50%",
    );
    bw.setNow("2026-12-01T00:20:00Z");
    t.match(await run(), { warned: 0, opened: 0, resolved: 0 });
    await expectMails([], "nothing more");
    const rows = await ctx.stores.db.query<{ month: string; level: string }>(
      "SELECT month, level FROM budget_warnings WHERE scope = 'connection' AND target_id = $1 ORDER BY month, level",
      [PA],
    );
    t.same(
      rows.rows.map((r) => `${r.month} ${r.level}`),
      ["2026-11 100", "2026-11 50", "2026-11 80", "2026-11 projected", "2026-12 50"],
      "which warnings were sent is persisted per month",
    );
  });

  t.test(`an organization budget over its connections (${relational}, ${series})`, async (t) => {
    const bw = await budgetWorld(t, relational, series);
    if (!bw) return;
    const { app, w, ctx } = bw;
    const { OB } = w.conns;
    const bob = w.keys.bobOrgB;
    await addMember(ctx.stores.db, { org: w.orgs.orgB.id, user: w.users.carol.id, role: "admin" });
    await addMember(ctx.stores.db, { org: w.orgs.orgB.id, user: w.users.dave.id, role: "member" });
    bw.setNow("2026-11-28T00:00:00Z");
    const made = await call(app, bob, "POST", "/v1/connections", {
      service_type: "workflow_b",
      service_name: "org B make",
      api_token: "secret-token-OB2",
    });
    const OB2 = (made.json() as { connection: { id: string } }).connection.id;
    t.equal((await call(app, bob, "PUT", "/v1/budget", { monthly_budget_usd: 10 })).statusCode, 200);

    bw.setNow("2026-11-28T00:01:00Z");
    await bw.heartbeat(4); // the gateway: $4
    await bw.entry(OB2, 200, bob); // the make connection: $2
    t.match(await runBudgetChecks(ctx), { warned: 1 });
    const warning = await bw.mails(OB);
    t.same(
      warning.map((m) => `${m.subject} -> ${m.recipient}`),
      [
        "[Vigil] organization Org B has used 50% of its monthly budget -> bob@b.example",
        "[Vigil] organization Org B has used 50% of its monthly budget -> carol@c.example",
      ],
      "filed under the top spender, told to the organization's owners and admins (not members)",
    );
    const history = await call(app, bob, "GET", "/v1/alerts?kind=budget_warning");
    t.equal(history.statusCode, 200);
    t.match(
      (history.json() as { data: unknown[] }).data,
      [
        { kind: "budget_warning", organization_id: w.orgs.orgB.id, connection_id: OB },
        { kind: "budget_warning", organization_id: w.orgs.orgB.id, connection_id: OB },
      ],
      "the alert history files the account budget's warning under the organization",
    );

    bw.setNow("2026-11-28T00:02:00Z");
    await bw.entry(OB2, 500, bob); // OB2 $7 is now the top spender; $11 in all
    t.match(await runBudgetChecks(ctx), { opened: 1 });
    t.same(await bw.incidents(OB), [], "not the former top spender");
    const [incident] = await bw.incidents(OB2);
    t.match(incident, { status: "open", title: "organization Org B is over its monthly budget (2026-11)" });
    t.same(
      (await bw.mails(OB2)).map((m) => m.subject),
      [
        "[Vigil] organization Org B has used 80% of its monthly budget",
        "[Vigil] organization Org B has used 80% of its monthly budget",
        "[Vigil] organization Org B is over its monthly budget",
        "[Vigil] organization Org B is over its monthly budget",
      ],
      "80% and 100% crossed at once: an alert for each threshold, to each recipient",
    );

    bw.setNow("2026-11-28T00:03:00Z");
    await bw.heartbeat(10); // the gateway overtakes; the incident stays where it is
    t.match(await runBudgetChecks(ctx), { warned: 0, opened: 0, resolved: 0 });
    t.same(await bw.incidents(OB), []);

    bw.setNow("2026-11-28T00:04:00Z");
    const removed = await call(app, bob, "PUT", "/v1/budget", { monthly_budget_usd: null });
    t.equal(removed.statusCode, 200);
    t.match(await bw.incidents(OB2), [{ status: "resolved" }], "removing the budget resolves its incident");
    const last = (await bw.mails(OB2)).slice(-2);
    t.same(
      last.map((m) => `${m.kind} ${m.subject}`),
      [
        "recovery [Vigil] organization Org B is no longer over budget",
        "recovery [Vigil] organization Org B is no longer over budget",
      ],
    );
    t.match(await runBudgetChecks(ctx), { evaluated: 0, resolved: 0 });
  });
}

t.test("the sweep resolves an incident no budget holds; work per run is bounded", async (t) => {
  const bw = await budgetWorld(t);
  if (!bw) return;
  const { app, w, ctx } = bw;
  const db = ctx.stores.db;
  const { PA, PB, PC } = w.conns;
  bw.setNow("2026-11-20T00:00:00Z");
  for (const [conn, key] of [
    [PA, w.keys.alicePersonal],
    [PB, w.keys.bobPersonal],
    [PC, w.keys.carolPersonal],
  ] as const) {
    await bw.entry(conn, 1_000, key);
    await call(app, key, "PUT", `/v1/connections/${conn}/budget`, { monthly_budget_usd: 5 });
    t.equal((await bw.incidents(conn))[0]?.status, "open", "set below the spend: the incident opens at once");
  }

  // a budget gone behind the job's back (removed by hand): its incident is swept
  await db.query("DELETE FROM budgets WHERE target_id = $1", [PB]);
  bw.setNow("2026-11-20T00:05:00Z");
  t.match(await runBudgetChecks(ctx), { evaluated: 2, resolved: 1 });
  t.equal((await bw.incidents(PB))[0]?.status, "resolved", "PB's incident is resolved");
  t.equal((await bw.incidents(PA))[0]?.status, "open", "PA's is still held by its budget");
  t.equal((await bw.incidents(PC))[0]?.status, "open");

  // bounded: once a run has read `connections` connections' spend it stops; the rest is next
  await db.query("UPDATE budgets SET checked_at = NULL");
  const limits = { budgets: 10, connections: 1, sweep: 10 };
  bw.setNow("2026-11-20T00:10:00Z");
  t.match(await runBudgetChecks(ctx, limits), { evaluated: 1 });
  const checked = async () =>
    (
      await db.query<{ checked_at: Date | null }>("SELECT checked_at FROM budgets ORDER BY target_id")
    ).rows.map((r) => (r.checked_at ? new Date(r.checked_at).toISOString() : null));
  t.same((await checked()).filter((c) => c === null).length, 1, "one budget waits");
  bw.setNow("2026-11-20T00:15:00Z");
  t.match(await runBudgetChecks(ctx, limits), { evaluated: 1 });
  t.same(
    (await checked()).sort(),
    ["2026-11-20T00:10:00.000Z", "2026-11-20T00:15:00.000Z"],
    "its turn came next",
  );
  t.same(
    [(await bw.incidents(PA)).length, (await bw.incidents(PC)).length],
    [1, 1],
    "evaluating an over budget again opens nothing new",
  );
});
