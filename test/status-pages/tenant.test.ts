import t from "tap";
import { writeSamples } from "../../src/availability/samples.js";
import { recordStatus, type StatusEvent } from "../../src/connections/status.js";
import { type IncidentKind, openIncident } from "../../src/incidents/incidents.js";
import { CHECK_MS } from "../../src/status-pages/cache.js";
import { BADGE_KINDS } from "../../src/status-pages/public-model.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * Issue #34 point 6: no page, feed, badge or summary reveals another account's or an unpublished
 * connection's data. Three accounts publish pages (alice's personal one, organization A's, bob's
 * organization B's) over connections that all have samples, statuses and internal incidents,
 * beside connections that are on no page (alice's own unpublished one fails every check and has
 * an open outage). Every public representation of every page, by its path and by its custom
 * domain, is searched for every id, name, URL, credential, e-mail, organization and internal
 * incident title of the world, and for the other pages' content; the figures a page shows are
 * those of its own components only. A connection moved to another account or deleted leaves its
 * page (within the cache's check interval).
 */

const MIN = 60_000;
// a 1×1 PNG
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

interface Summary {
  status: { indicator: string; description: string };
  components: {
    id: string;
    name: string;
    status: string;
    uptime: Record<string, number | null>;
    response_time_ms?: number | null;
  }[];
  incidents: { name: string }[];
}

interface PageAnswer {
  id: string;
  slug: string;
  custom_domain: string | null;
  groups: { components: { connection_id: string; display_name: string; key: string }[] }[];
}

/** `n` samples of a connection over the last minutes of today (UTC): the first `failing` fail. */
async function samples(ta: TestApp, connectionId: string, n: number, failing: number, responseMs: number) {
  const now = ta.ctx.now().getTime();
  const step = Math.min(MIN, Math.floor((now % 86_400_000) / (n + 1)));
  await writeSamples(
    ta.ctx,
    Array.from({ length: n }, (_, i) => {
      const ok = i >= failing;
      return {
        ts: new Date(now - (i + 1) * step),
        connection_id: connectionId,
        available: ok,
        response_time_ms: responseMs,
        status_code: ok ? 200 : 503,
        reason: ok ? null : "http_status",
        error: ok ? null : `status 503 from ${connectionId}`,
        synthetic: false,
        source: "probe",
      };
    }),
  );
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`no public representation reveals what is not on the page (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const { app, ctx } = ta;
    const db = ctx.stores.db;
    const w = await seedTenants(ta);
    const { alicePersonal: alice, aliceOrgA, bobOrgB } = w.keys;

    const connection = async (key: string, body: Record<string, unknown>) => {
      for (const f of ["api_key", "api_token"])
        if (typeof body[f] === "string") w.secrets.push(body[f] as string);
      const res = await call(app, key, "POST", "/v1/connections", body);
      t.equal(res.statusCode, 201, res.body);
      return (res.json() as { connection: { id: string } }).connection.id;
    };
    // alice's own connection on no page; org A's connections that will leave its page
    const PU = await connection(alice, {
      service_type: "workflow_a",
      service_name: "alice hidden worker",
      base_url: "http://127.0.0.1:4",
      api_key: "secret-key-PU-d00d",
    });
    const OA2 = await connection(alice, {
      service_type: "workflow_a",
      service_name: "org A billing api",
      base_url: "http://127.0.0.1:5",
      api_key: "secret-key-OA2-beef",
      organization_id: w.orgs.orgA.id,
    });
    const OA3 = await connection(aliceOrgA, { service_type: "gateway", service_name: "org A edge gateway" });
    const conns = { ...w.conns, PU, OA2, OA3 };

    // samples: PA 18 of 20 up at 100 ms; the unpublished PU 0 of 30 at 9,999 ms; the others theirs
    await samples(ta, conns.PA, 20, 2, 100);
    await samples(ta, PU, 30, 30, 9999);
    await samples(ta, conns.OA, 10, 0, 200);
    await samples(ta, OA2, 10, 5, 300);
    await samples(ta, OA3, 10, 10, 400);
    await samples(ta, conns.OB, 10, 3, 500);
    await samples(ta, conns.PB, 10, 10, 600);
    await samples(ta, conns.PC, 10, 10, 700);
    await ctx.stores.series.waitVisible();

    // statuses, as the probes write them; internal incidents through the incidents domain
    const owner: Record<string, { userId: string; organizationId: string | null; name: string }> = {
      [conns.PA]: { userId: w.users.alice.id, organizationId: null, name: "alice n8n" },
      [PU]: { userId: w.users.alice.id, organizationId: null, name: "alice hidden worker" },
      [conns.OA]: { userId: w.users.alice.id, organizationId: w.orgs.orgA.id, name: "org A make" },
      [OA2]: { userId: w.users.alice.id, organizationId: w.orgs.orgA.id, name: "org A billing api" },
      [OA3]: { userId: w.users.alice.id, organizationId: w.orgs.orgA.id, name: "org A edge gateway" },
      [conns.OB]: { userId: w.users.bob.id, organizationId: w.orgs.orgB.id, name: "org B gateway" },
      [conns.PB]: { userId: w.users.bob.id, organizationId: null, name: "bob n8n" },
      [conns.PC]: { userId: w.users.carol.id, organizationId: null, name: "carol n8n" },
    };
    const status = (id: string, event: StatusEvent) =>
      db.transaction((tx) => recordStatus(tx, id, event, ctx.now()));
    const failed: StatusEvent = { type: "check_failed", badCredentials: true, failures: 3, threshold: 3 };
    for (const id of [conns.PA, conns.OA, OA2, OA3, conns.OB]) await status(id, { type: "check_succeeded" });
    for (const id of [PU, conns.PB, conns.PC]) await status(id, failed);
    const titles: string[] = [];
    const incidentIds: string[] = [];
    const incident = async (id: string, kind: IncidentKind) => {
      const o = owner[id];
      if (!o) throw new Error("no owner");
      const title = `INTERNAL ${kind} of ${o.name}: token ${id.slice(0, 8)} refused`;
      titles.push(title);
      const made = await db.transaction((tx) =>
        openIncident(
          tx,
          { connectionId: id, connectionName: o.name, userId: o.userId, organizationId: o.organizationId },
          {
            kind,
            title,
            detail: { failures: 3, error: `${o.name} refused secret-key` },
            at: new Date(ctx.now().getTime() - 15 * MIN),
            publicUrl: ctx.config.publicUrl,
            failureMailIntervalSeconds: 0,
          },
        ),
      );
      if (made) incidentIds.push(made);
    };
    await incident(PU, "availability");
    await incident(conns.PA, "anomaly");
    await incident(conns.OA, "budget");
    await incident(OA2, "slo_burn");
    await incident(conns.OB, "availability");
    await incident(conns.PC, "availability");
    t.equal(incidentIds.length, 6, "six internal incidents open");

    const create = async (key: string, body: Record<string, unknown>) => {
      const res = await call(app, key, "POST", "/v1/status-pages", body);
      t.equal(res.statusCode, 201, res.body);
      return res.json() as PageAnswer;
    };
    const alicePage = await create(alice, {
      slug: "alice-public",
      title: "Alice public status",
      description: "Our workflows.",
      show_response_times: true,
      custom_domain: "status.alice.example",
      logo: `data:image/png;base64,${PNG}`,
      groups: [
        { name: "Automation", components: [{ connection_id: conns.PA, display_name: "Public Workflows" }] },
      ],
    });
    const orgAPage = await create(aliceOrgA, {
      slug: "orga-public",
      title: "Company A status",
      show_response_times: true,
      custom_domain: "status.company-a.example",
      groups: [
        {
          name: "Apps",
          components: [
            { connection_id: conns.OA, display_name: "Public App" },
            { connection_id: OA2, display_name: "Public Billing" },
          ],
        },
        { name: "Edge", components: [{ connection_id: OA3, display_name: "Public Edge" }] },
      ],
    });
    const bobPage = await create(bobOrgB, {
      slug: "orgb-public",
      title: "Company B status",
      show_response_times: false,
      groups: [
        { name: "Gateways", components: [{ connection_id: conns.OB, display_name: "Public Gateway" }] },
      ],
    });
    const postOn = async (key: string, pageId: string, title: string, message: string) => {
      const res = await call(app, key, "POST", `/v1/status-pages/${pageId}/incidents`, {
        title,
        status: "investigating",
        message,
      });
      t.equal(res.statusCode, 201, res.body);
    };
    await postOn(alice, alicePage.id, "Slow workflow runs", "We are looking into it.");
    await postOn(bobOrgB, bobPage.id, "Gateway errors at Company B", "Some requests fail.");

    const keysOf = (p: PageAnswer) => p.groups.flatMap((g) => g.components.map((c) => c.key));
    const pages = [
      {
        page: alicePage,
        content: ["Alice public status", "Public Workflows", "Slow workflow runs", ...keysOf(alicePage)],
        logo: true,
      },
      {
        page: orgAPage,
        content: ["Company A status", "Public App", "Public Billing", "Public Edge", ...keysOf(orgAPage)],
        logo: false,
      },
      {
        page: bobPage,
        content: ["Company B status", "Public Gateway", "Gateway errors at Company B", ...keysOf(bobPage)],
        logo: false,
      },
    ];

    // what no visitor may ever read, whichever page
    const forbidden = new Map<string, string>();
    const forbid = (what: string, values: string[]) => {
      for (const v of values) forbidden.set(v, what);
    };
    forbid("a connection id", Object.values(conns));
    forbid(
      "a connection's name",
      Object.values(owner).map((o) => o.name),
    );
    forbid("a connection's URL", [
      "http://127.0.0.1:1",
      "http://127.0.0.1:2",
      "http://127.0.0.1:3",
      "127.0.0.1:4",
      "127.0.0.1:5",
    ]);
    forbid("a credential", [...w.secrets, ...Object.values(w.keys).filter(Boolean)]);
    forbid(
      "a user's e-mail",
      Object.values(w.users).map((u) => u.email),
    );
    forbid(
      "a user id",
      Object.values(w.users).map((u) => u.id),
    );
    forbid("an organization's name", ["Org A", "Org B"]);
    forbid("an organization id", [w.orgs.orgA.id, w.orgs.orgB.id]);
    forbid("an internal incident title", titles);
    forbid("an internal incident id", incidentIds);
    forbid("a page's internal id", [alicePage.id, orgAPage.id, bobPage.id]);
    forbid("a check's error", ["status 503 from", "refused secret-key"]);
    t.ok(forbidden.size > 40, `${forbidden.size} strings no visitor may read`);

    /** Every public path of a page under `prefix` (its slug path, or "" on its custom domain). */
    const pathsOf = (p: PageAnswer, logo: boolean) => [
      "",
      "/feed.atom",
      "/summary.json",
      "/badge.svg",
      "/badge.json",
      ...(logo ? ["/logo"] : []),
      ...keysOf(p).flatMap((key) =>
        BADGE_KINDS.flatMap((kind) => [`/badge/${key}/${kind}.svg`, `/badge/${key}/${kind}.json`]),
      ),
    ];
    /** Each representation of a page: by its path, and by its custom domain's Host. */
    const fetchAll = async (p: PageAnswer, logo: boolean) => {
      const out: { url: string; status: number; body: string; cookie: boolean }[] = [];
      for (const path of pathsOf(p, logo)) {
        const doors: { url: string; host?: string }[] = [{ url: `/status/${p.slug}${path}` }];
        if (p.custom_domain) doors.push({ url: path || "/", host: p.custom_domain });
        for (const d of doors) {
          const res = await app.inject({
            method: "GET",
            url: d.url,
            headers: d.host ? { host: d.host } : {},
          });
          out.push({
            url: d.host ? `https://${d.host}${d.url}` : d.url,
            status: res.statusCode,
            body: res.body,
            cookie: res.headers["set-cookie"] !== undefined,
          });
        }
      }
      return out;
    };

    await t.test("every representation of every page shows its own content and nothing else", async (t) => {
      for (const { page, content, logo } of pages) {
        const answers = await fetchAll(page, logo);
        const doors = page.custom_domain ? 2 : 1;
        const expected = doors * (5 + (logo ? 1 : 0) + keysOf(page).length * BADGE_KINDS.length * 2);
        t.equal(answers.length, expected, `${page.slug}: ${expected} answers, by ${doors} door(s)`);
        const others = pages.filter((x) => x.page !== page).flatMap((x) => x.content);
        const leaks: string[] = [];
        for (const a of answers) {
          // a response-time badge of a page that hides response times is the only 404
          const hidden = page.slug === "orgb-public" && a.url.includes("/response-time.");
          if (a.status !== (hidden ? 404 : 200)) leaks.push(`${a.url}: answered ${a.status}`);
          if (a.cookie) leaks.push(`${a.url}: sets a cookie`);
          for (const [value, what] of forbidden)
            if (a.body.includes(value)) leaks.push(`${a.url}: ${what} (${value})`);
          for (const value of others)
            if (a.body.includes(value)) leaks.push(`${a.url}: another page's "${value}"`);
        }
        t.same(
          leaks,
          [],
          `${page.slug}: no id, name, URL, credential, e-mail, organization or internal incident`,
        );
        const html = answers.find((a) => a.url === `/status/${page.slug}`)?.body ?? "";
        for (const c of content.filter((x) => !/^[a-z0-9]{12}$/.test(x)))
          t.match(html, c.replace(/'/g, "&#39;"), `${page.slug}: the page shows "${c}"`);
      }
    });

    const summary = async (slug: string) => {
      const res = await app.inject({ method: "GET", url: `/status/${slug}/summary.json` });
      t.equal(res.statusCode, 200);
      return res.json() as Summary;
    };

    await t.test("a page's figures are its own components' only", async (t) => {
      const a = await summary("alice-public");
      t.same(
        a.components.map((c) => [c.name, c.status, c.uptime, c.response_time_ms]),
        [["Public Workflows", "operational", { "24h": 90, "7d": 90, "30d": 90, "90d": 90 }, 100]],
        "PA's 18 of 20 checks at 100 ms, not the unpublished connection's 30 failed ones at 9,999 ms; its anomaly is internal",
      );
      t.match(
        a.status,
        { indicator: "minor", description: "Incident under investigation" },
        "the post, no outage",
      );
      const shields = await app.inject({
        method: "GET",
        url: `/status/alice-public/badge/${keysOf(alicePage)[0]}/uptime-24h.json`,
      });
      t.match(shields.json(), { message: /^90(\.0+)?%$/ }, "the 24 h badge says 90 %");
      const html = (await app.inject({ method: "GET", url: "/status/alice-public" })).body;
      t.match(html, "(18/20)", "today's cell counts PA's checks");
      t.notMatch(html, "/50)", "and not PA's and PU's together");

      const o = await summary("orga-public");
      t.same(
        o.components.map((c) => [c.name, c.status, c.uptime["24h"], c.response_time_ms]),
        [
          ["Public App", "operational", 100, 200],
          ["Public Billing", "partial_outage", 50, 300],
          ["Public Edge", "operational", 0, 400],
        ],
        "org A's components: their own checks and states (a budget incident is internal, an SLO burn is partial)",
      );
      const b = await summary("orgb-public");
      t.same(
        b.components.map((c) => [c.name, c.status, c.uptime["24h"], "response_time_ms" in c]),
        [["Public Gateway", "major_outage", 70, false]],
        "org B's gateway: its open outage, its 7 of 10 checks, no response time (hidden)",
      );
      t.match(b.status, { indicator: "critical" });
      t.same(
        b.incidents.map((i) => i.name),
        ["Gateway errors at Company B"],
        "org B's own post only",
      );
    });

    await t.test("a connection moved to another account or deleted leaves the page", async (t) => {
      const [, billing, edge] = keysOf(orgAPage);
      const moved = await call(app, alice, "PUT", `/v1/connections/${OA2}`, { organization_id: "personal" });
      t.equal(moved.statusCode, 200, moved.body);
      const gone = await call(app, alice, "DELETE", `/v1/connections/${OA3}`);
      t.equal(gone.statusCode, 200, gone.body);

      // another code path changed them: the cache sees it at its next check
      const until = Date.now() + CHECK_MS + 5_000;
      const namesNow = async () => (await summary("orga-public")).components.map((c) => c.name);
      let names = await namesNow();
      while (names.length !== 1 && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 250));
        names = await namesNow();
      }
      t.same(names, ["Public App"], `gone from summary.json within ${CHECK_MS / 1000} s and a little`);
      const o = await summary("orga-public");
      t.same(o.components[0]?.uptime["24h"], 100, "the page's figures are the remaining component's");
      const answers = await fetchAll(orgAPage, false);
      const left: string[] = [];
      for (const a of answers) {
        const ofGone = (billing && a.url.includes(billing)) || (edge && a.url.includes(edge));
        if (a.status !== (ofGone ? 404 : 200)) left.push(`${a.url}: answered ${a.status}`);
        for (const v of [
          "Public Billing",
          "Public Edge",
          billing ?? "-",
          edge ?? "-",
          OA2,
          OA3,
          "org A billing api",
        ])
          if (!ofGone && a.body.includes(v)) left.push(`${a.url}: still shows ${v}`);
      }
      t.same(left, [], "no representation shows them; their badges are 404, the remaining one's answer");
      const rest = await call(app, aliceOrgA, "GET", `/v1/status-pages/${orgAPage.id}`);
      t.same(
        (rest.json() as PageAnswer).groups.flatMap((g) => g.components.map((c) => c.display_name)),
        ["Public App"],
        "members see the page without them too",
      );
    });
  });
}
