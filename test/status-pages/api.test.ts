import t from "tap";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * /v1/status-pages (issue #34; docs/status-pages.md): pages and their incident posts over the
 * REST API, every bad input of the issue a clear 4xx with nothing stored, each account seeing
 * and changing only its own pages, and what a visitor then reads at /status/{slug}.
 */

const ABSENT = "00000000-0000-4000-8000-000000000000";
// a 1×1 PNG
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

interface Page {
  id: string;
  organization_id: string | null;
  slug: string;
  title: string;
  url: string;
  logo: { content_type: string; bytes: number; url: string } | null;
  custom_domain: string | null;
  groups: { name: string; components: { connection_id: string; display_name: string; key: string }[] }[];
}
interface Post {
  id: string;
  status: string;
  resolved_at: string | null;
  updates: { status: string; message: string }[];
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`status pages over the API (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const { app, ctx } = ta;
    const db = ctx.stores.db;
    const w = await seedTenants(ta);
    const { alicePersonal: alice, aliceOrgA, carolPersonal: carol, davePersonal: dave } = w.keys;
    const count = async (table: string) =>
      Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n);
    const visit = (path: string, headers: Record<string, string> = {}) =>
      app.inject({ method: "GET", url: path, headers });

    const body = (over: Record<string, unknown> = {}) => ({
      slug: "alice-status",
      title: "Alice's services",
      description: "What our customers rely on.",
      show_response_times: true,
      groups: [
        { name: "Automation", components: [{ connection_id: w.conns.PA, display_name: "Workflows" }] },
      ],
      ...over,
    });

    let page: Page;
    await t.test("an admin creates a page; a visitor reads it without a key", async (t) => {
      const res = await call(
        app,
        alice,
        "POST",
        "/v1/status-pages",
        body({ logo: `data:image/png;base64,${PNG}` }),
      );
      t.equal(res.statusCode, 201, res.body);
      page = res.json() as Page;
      t.match(page, {
        organization_id: null,
        slug: "alice-status",
        url: `${ctx.config.publicUrl}/status/alice-status`,
        logo: { content_type: "image/png", bytes: 70 },
        groups: [
          { name: "Automation", components: [{ connection_id: w.conns.PA, display_name: "Workflows" }] },
        ],
      });
      const key = page.groups[0]?.components[0]?.key ?? "";
      t.match(key, /^[a-z0-9]{12}$/, "the component has a public key");

      const html = await visit("/status/alice-status");
      t.equal(html.statusCode, 200);
      t.match(html.headers["content-type"], /text\/html/);
      t.match(html.headers["content-security-policy"], /default-src 'none'/);
      t.match(html.headers["cache-control"], /max-age=\d+/);
      t.ok(html.headers.etag, "an ETag");
      t.match(html.body, "Alice&#39;s services");
      t.match(html.body, "Workflows");
      t.notMatch(html.body, "alice n8n", "the connection's real name never appears");
      t.notMatch(html.body, w.conns.PA, "nor its id");
      t.notMatch(html.body, "127.0.0.1:1", "nor its URL");
      t.notMatch(html.body, /<script/i, "no script");

      const noBr = await visit("/status/alice-status", { "accept-encoding": "br;q=0, gzip" });
      t.equal(noBr.headers["content-encoding"], "gzip", "br;q=0 is refused: gzip");
      const br = await visit("/status/alice-status", { "accept-encoding": "gzip, br" });
      t.equal(br.headers["content-encoding"], "br");
      t.not(br.headers.etag, noBr.headers.etag, "each encoding has its own ETag");
      const again = await visit("/status/alice-status", { "if-none-match": String(html.headers.etag) });
      t.equal(again.statusCode, 304, "a matching If-None-Match is a 304");

      const logo = await visit(new URL(page.logo?.url ?? "").pathname);
      t.equal(logo.statusCode, 200);
      t.equal(logo.headers["content-type"], "image/png");
      t.equal(logo.rawPayload.toString("base64"), PNG, "the logo as uploaded");

      const summary = await visit("/status/alice-status/summary.json");
      t.equal(summary.statusCode, 200);
      const s = summary.json() as {
        components: { id: string; name: string; badges: Record<string, unknown> }[];
      };
      t.equal(s.components[0]?.id, key);
      t.equal(s.components[0]?.name, "Workflows");
      t.notMatch(summary.body, w.conns.PA, "summary.json names no connection id");

      const badge = await visit(`/status/alice-status/badge/${key}/uptime-30d.svg`);
      t.equal(badge.statusCode, 200);
      t.match(badge.headers["content-type"], /image\/svg\+xml/);
      t.match(badge.body, /<svg/);
      const shields = await visit(`/status/alice-status/badge/${key}/uptime-30d.json`);
      t.match(shields.json(), { schemaVersion: 1, label: "uptime 30d" });
      t.equal(
        (await visit(`/status/alice-status/badge/${key}/nope.svg`)).statusCode,
        404,
        "an unknown kind is a 404",
      );
      t.equal((await visit("/status/alice-status/badge/aaaaaaaaaaaa/status.svg")).statusCode, 404);
      t.equal((await visit("/status/nobody-here")).statusCode, 404, "an unknown slug is a 404");
    });

    await t.test("bad input: a clear 4xx and nothing stored", async (t) => {
      const before = await count("status_pages");
      const cases: [string, Record<string, unknown>, number, RegExp][] = [
        ["a taken slug", body(), 409, /slug "alice-status" is taken/],
        ["a reserved slug", body({ slug: "api" }), 400, /body\.slug: "api" is reserved/],
        ["oauth is reserved", body({ slug: "oauth" }), 400, /reserved/],
        ["docs is reserved", body({ slug: "docs" }), 400, /reserved/],
        ["a slug with a space", body({ slug: "my page" }), 400, /body\.slug: must be 3 to 50 lowercase/],
        ["upper case", body({ slug: "MyPage" }), 400, /body\.slug/],
        ["a slash", body({ slug: "a/b" }), 400, /body\.slug/],
        ["too short", body({ slug: "ab" }), 400, /body\.slug/],
        ["a trailing hyphen", body({ slug: "abc-" }), 400, /body\.slug/],
        ["an empty title", body({ slug: "ok-slug", title: "  " }), 400, /body\.title: must not be empty/],
        [
          "another account's connection",
          body({
            slug: "ok-slug",
            groups: [{ name: "G", components: [{ connection_id: w.conns.PC, display_name: "X" }] }],
          }),
          403,
          /access to connection/,
        ],
        [
          "an absent connection",
          body({
            slug: "ok-slug",
            groups: [{ name: "G", components: [{ connection_id: ABSENT, display_name: "X" }] }],
          }),
          404,
          /not found/,
        ],
        [
          "an organization's connection on a personal page",
          body({
            slug: "ok-slug",
            groups: [{ name: "G", components: [{ connection_id: w.conns.OA, display_name: "X" }] }],
          }),
          400,
          /body\.groups\.0\.components\.0\.connection_id: connection .* belongs to another account/,
        ],
        [
          "a connection twice",
          body({
            slug: "ok-slug",
            groups: [
              {
                name: "G",
                components: [
                  { connection_id: w.conns.PA, display_name: "X" },
                  { connection_id: w.conns.PA, display_name: "Y" },
                ],
              },
            ],
          }),
          400,
          /on the page twice/,
        ],
        [
          "a logo that is not an image",
          body({
            slug: "ok-slug",
            logo: `data:image/png;base64,${Buffer.from("hello, world").toString("base64")}`,
          }),
          400,
          /body\.logo: is not an image/,
        ],
        [
          "a logo whose type lies",
          body({ slug: "ok-slug", logo: `data:image/jpeg;base64,${PNG}` }),
          400,
          /body\.logo: says image\/jpeg but its bytes are a image\/png/,
        ],
        [
          "a logo that is not a data URL",
          body({ slug: "ok-slug", logo: "https://example.com/logo.png" }),
          400,
          /body\.logo: must be a base64 data URL/,
        ],
        [
          "a logo too large",
          body({
            slug: "ok-slug",
            logo: `data:image/png;base64,${Buffer.concat([Buffer.from(PNG, "base64"), Buffer.alloc(300 * 1024)]).toString("base64")}`,
          }),
          400,
          /body\.logo: is 301 KiB; a logo may be at most 256 KiB/,
        ],
        [
          "a host name that is not one",
          body({ slug: "ok-slug", custom_domain: "https://status.example.com/" }),
          400,
          /body\.custom_domain: must be a host name/,
        ],
        [
          "Vigil's own host",
          body({ slug: "ok-slug", custom_domain: new URL(ctx.config.publicUrl).hostname + "." }),
          400,
          /body\.custom_domain/,
        ],
        [
          "an IP address as a custom domain",
          body({ slug: "ok-slug", custom_domain: "127.0.0.1" }),
          400,
          /body\.custom_domain: must be a host name .*no IP address/,
        ],
        [
          "localhost as a custom domain",
          body({ slug: "ok-slug", custom_domain: "api.localhost" }),
          400,
          /body\.custom_domain: is Vigil's own host/,
        ],
        [
          "an unknown field",
          body({ slug: "ok-slug", colour: "red" }),
          400,
          /body\.colour: is not a known field/,
        ],
        [
          "a display name too long",
          body({
            slug: "ok-slug",
            groups: [
              { name: "G", components: [{ connection_id: w.conns.PA, display_name: "x".repeat(81) }] },
            ],
          }),
          400,
          /display_name/,
        ],
      ];
      for (const [what, b, status, message] of cases) {
        const res = await call(app, alice, "POST", "/v1/status-pages", b);
        t.equal(res.statusCode, status, `${what}: ${res.body}`);
        t.match((res.json() as { error: { message: string } }).error.message, message, what);
      }
      t.equal(await count("status_pages"), before, "nothing stored");
      t.equal(await count("status_page_components"), 1, "no component stored either");
    });

    await t.test(
      "an organization's page: admins change it, members post, other accounts see nothing",
      async (t) => {
        const orgBody = body({
          slug: "org-a",
          organization_id: w.orgs.orgA.id,
          groups: [{ name: "Make", components: [{ connection_id: w.conns.OA, display_name: "Scenarios" }] }],
        });
        t.equal(
          (await call(app, dave, "POST", "/v1/status-pages", orgBody)).statusCode,
          403,
          "a plain member may not create one",
        );
        const made = await call(app, aliceOrgA, "POST", "/v1/status-pages", orgBody);
        t.equal(made.statusCode, 201, made.body);
        const org = made.json() as Page;
        t.equal(org.organization_id, w.orgs.orgA.id);
        const daveList = (await call(app, dave, "GET", "/v1/status-pages")).json() as {
          status_pages: Page[];
        };
        t.same(
          daveList.status_pages.map((p) => p.slug),
          ["org-a"],
          "a member sees the organization's page, not alice's personal one",
        );
        t.equal(
          (await call(app, carol, "GET", `/v1/status-pages/${org.id}`)).statusCode,
          404,
          "another account: not found",
        );
        t.equal(
          (await call(app, carol, "PUT", `/v1/status-pages/${org.id}`, body({ slug: "stolen" }))).statusCode,
          404,
        );
        t.equal((await call(app, carol, "DELETE", `/v1/status-pages/${org.id}`)).statusCode, 404);
        t.equal(
          (
            await call(app, carol, "POST", `/v1/status-pages/${org.id}/incidents`, {
              title: "x",
              status: "investigating",
              message: "y",
            })
          ).statusCode,
          404,
          "another account cannot post",
        );
        t.equal(
          (
            await call(app, dave, "PUT", `/v1/status-pages/${org.id}`, {
              ...orgBody,
              organization_id: undefined,
              title: "Dave's",
            })
          ).statusCode,
          403,
          "a member may not change it",
        );
        const post = await call(app, dave, "POST", `/v1/status-pages/${org.id}/incidents`, {
          title: "Scenarios delayed",
          status: "investigating",
          message: "We are looking into it.",
        });
        t.equal(post.statusCode, 201, "a member posts an incident");
      },
    );

    await t.test(
      "incident posts: shown at once, updated, resolved, never the internal timeline",
      async (t) => {
        const first = await visit("/status/alice-status");
        const created = await call(app, alice, "POST", `/v1/status-pages/${page.id}/incidents`, {
          title: "Delays <script>alert(1)</script>",
          status: "investigating",
          message: "Runs start late.\nWe are on it & <b>watching</b>.",
        });
        t.equal(created.statusCode, 201, created.body);
        const post = created.json() as Post;
        t.match(post, { status: "investigating", resolved_at: null, updates: [{ status: "investigating" }] });
        const html = await visit("/status/alice-status", { "if-none-match": String(first.headers.etag) });
        t.equal(html.statusCode, 200, "the page changed: the old ETag no longer matches");
        t.match(html.body, "Delays &lt;script&gt;alert(1)&lt;/script&gt;", "the title escaped");
        t.notMatch(html.body, "<script>alert(1)</script>");
        t.notMatch(html.body, "<b>watching</b>");

        const upd = await call(
          app,
          alice,
          "POST",
          `/v1/status-pages/${page.id}/incidents/${post.id}/updates`,
          {
            status: "resolved",
            message: "Fixed.",
          },
        );
        t.equal(upd.statusCode, 201, upd.body);
        const resolved = upd.json() as Post;
        t.equal(resolved.status, "resolved");
        t.ok(resolved.resolved_at, "resolved_at is set");
        t.same(
          resolved.updates.map((u) => u.status),
          ["resolved", "investigating"],
          "updates newest first",
        );
        const feed = await visit("/status/alice-status/feed.atom");
        t.equal(feed.statusCode, 200);
        t.match(feed.headers["content-type"], /application\/atom\+xml/);
        t.match(feed.body, "[Resolved]");
        t.notMatch(feed.body, "<script>alert(1)</script>");

        for (const [b, field] of [
          [{ title: "x", status: "fixed", message: "y" }, "body.status"],
          [{ title: "", status: "investigating", message: "y" }, "body.title"],
          [{ title: "x", status: "investigating", message: " " }, "body.message"],
        ] as const) {
          const res = await call(app, alice, "POST", `/v1/status-pages/${page.id}/incidents`, b);
          t.equal(res.statusCode, 400, res.body);
          t.match(res.json(), { error: { message: new RegExp(`^${field.replace(".", "\\.")}`) } });
        }
        t.equal(
          (
            await call(app, alice, "POST", `/v1/status-pages/${page.id}/incidents/${ABSENT}/updates`, {
              status: "resolved",
              message: "x",
            })
          ).statusCode,
          404,
        );
        const list = (await call(app, alice, "GET", `/v1/status-pages/${page.id}/incidents`)).json() as {
          incidents: Post[];
        };
        t.equal(list.incidents.length, 1);
        t.equal(
          (await call(app, alice, "DELETE", `/v1/status-pages/${page.id}/incidents/${post.id}`)).statusCode,
          200,
        );
        t.notMatch(
          (await visit("/status/alice-status")).body,
          "Delays",
          "a removed post is gone from the page",
        );
      },
    );

    await t.test("PUT keeps component keys, changes the slug, a custom domain answers by Host", async (t) => {
      const key = page.groups[0]?.components[0]?.key;
      const res = await call(app, alice, "PUT", `/v1/status-pages/${page.id}`, {
        ...body({ slug: "alice-renamed", custom_domain: "Status.Alice.Example" }),
        groups: [
          { name: "Automation", components: [{ connection_id: w.conns.PA, display_name: "Workflows" }] },
        ],
      });
      t.equal(res.statusCode, 200, res.body);
      const updated = res.json() as Page;
      t.equal(updated.groups[0]?.components[0]?.key, key, "the key stays");
      t.equal(updated.custom_domain, "status.alice.example", "the host name lower-cased");
      t.ok(updated.logo, "an absent logo keeps the current one");
      t.equal((await visit("/status/alice-status")).statusCode, 404, "the old slug is gone");
      t.equal((await visit("/status/alice-renamed")).statusCode, 200);
      const byHost = await visit("/", { host: "status.alice.example" });
      t.equal(byHost.statusCode, 200, "the custom domain serves the page at /");
      t.match(byHost.body, "Workflows");
      t.match(byHost.body, 'href="/feed.atom"', "links without the /status prefix on a custom domain");
      t.equal((await visit("/summary.json", { host: "status.alice.example:443" })).statusCode, 200);
      t.equal(
        (await visit("/v1/connections", { host: "status.alice.example" })).statusCode,
        404,
        "nothing else answers there",
      );
      t.equal((await visit("/signin", { host: "status.alice.example" })).statusCode, 404);
      const other = await call(app, carol, "POST", "/v1/status-pages", {
        ...body({ slug: "carol-page", custom_domain: "status.alice.example" }),
        groups: [{ name: "G", components: [{ connection_id: w.conns.PC, display_name: "C" }] }],
      });
      t.equal(other.statusCode, 409, "a custom domain is one page's");
      t.match(other.json(), { error: { message: /custom domain status\.alice\.example is taken/ } });
    });

    await t.test("STATUS_PAGE_DOMAINS: only the operator's domains", async (t) => {
      const strict = await testApp(t, {
        sameStoresAs: ta,
        env: { STATUS_PAGE_DOMAINS: "status.ok.example,.pages.example" },
      });
      const make = (slug: string, custom_domain: string) =>
        call(strict.app, carol, "POST", "/v1/status-pages", {
          ...body({ slug, custom_domain }),
          groups: [{ name: "G", components: [{ connection_id: w.conns.PC, display_name: "C" }] }],
        });
      const refused = await make("carol-one", "status.carol.example");
      t.equal(refused.statusCode, 400);
      t.match(refused.json(), {
        error: { message: /body\.custom_domain: is not among the domains .*STATUS_PAGE_DOMAINS/ },
      });
      t.equal(
        (await make("carol-two", "carol.pages.example")).statusCode,
        201,
        "a name under an allowed suffix",
      );
      t.equal((await make("carol-three", "status.ok.example")).statusCode, 201, "an allowed name");
    });

    await t.test("DELETE: the page, feed, summary and badges are gone", async (t) => {
      const key = page.groups[0]?.components[0]?.key;
      t.equal(
        (await call(app, w.keys.aliceReadOnly, "DELETE", `/v1/status-pages/${page.id}`)).statusCode,
        403,
      );
      t.equal((await call(app, alice, "DELETE", `/v1/status-pages/${page.id}`)).statusCode, 200);
      for (const p of ["", "/feed.atom", "/summary.json", `/badge/${key}/status.svg`])
        t.equal((await visit(`/status/alice-renamed${p}`)).statusCode, 404, `${p || "page"} 404`);
      const host = await visit("/", { host: "status.alice.example" });
      t.not(
        host.statusCode,
        200,
        "the custom domain no longer serves the page (it falls through to Vigil's own routes)",
      );
      t.notMatch(host.body, "Workflows");
    });
  });
}
