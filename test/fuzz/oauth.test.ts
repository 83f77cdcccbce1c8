import fc from "fast-check";
import type { LightMyRequestResponse } from "fastify";
import t from "tap";
import { createUser } from "../../src/identity/accounts.js";
import { issueCode, mcpResource } from "../../src/oauth/service.js";
import { testApp } from "../helpers/app.js";
import {
  approve,
  authorizeUrl,
  Browser,
  formFields,
  pkce,
  REDIRECT,
  registerClient,
  tokenRequest,
} from "../helpers/oauth.js";
import {
  allowTime,
  Findings,
  FUZZ_RUNS,
  FUZZ_SEED,
  printTable,
  progress,
  seedFor,
  Tally,
} from "./harness.js";
import { pct } from "./requests.js";
import { jsonText, nested, oddText, oddValue } from "./values.js";

/**
 * The OAuth forms and pages, fuzzed: client registration (RFC 7591 JSON metadata), the token and
 * revocation forms, the authorize request (query and consent form) and the sign-in form, with
 * odd field values, repeated and unknown fields, other content types, malformed and oversized
 * bodies. The property: never a 5xx; a status the endpoint documents; the RFC 6749 error body on
 * the JSON endpoints; HTML pages that echo no markup; redirects only to a registered redirect URI
 * or a same-site path. Afterwards the whole flow (register, sign in, approve, token, a tool call)
 * still works.
 */

const PUBLIC = "http://127.0.0.1:8080";
/** Text that would show as markup if a page echoed it unescaped. */
const MARKUP = `"><x-injected a='1'>`;

type Form = [string, string][];

interface FormRequest {
  form: string;
  method: "GET" | "POST";
  url: string;
  headers: Record<string, string>;
  payload?: string;
  remoteAddress: string;
  why: string[];
}

const formText = (f: Form) => f.map(([k, v]) => `${pct(k)}=${pct(v)}`).join("&");

/** Field values: the real ones mostly, or odd text, an empty string, markup, a long value. */
const field = (real: fc.Arbitrary<string>) =>
  fc.oneof(
    { weight: 12, arbitrary: real },
    { weight: 4, arbitrary: oddText.filter((x) => x.length < 20_000) },
    { weight: 2, arbitrary: fc.constantFrom("", MARKUP) },
    { weight: 1, arbitrary: fc.constant("a".repeat(20_000)) },
  );

/**
 * A form of the given fields: each with a real value, then up to three changes (a field given an
 * odd value, left out, repeated, or an unknown field added).
 */
function formOf(fields: Record<string, fc.Arbitrary<string>>): fc.Arbitrary<{ form: Form; why: string[] }> {
  const names = Object.keys(fields);
  type Change = (f: Form) => [Form, string];
  const change: fc.Arbitrary<Change> = fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .constantFrom(...names)
        .chain((n) => field(fields[n] as fc.Arbitrary<string>).map((v) => [n, v] as const))
        .map(([n, v]): Change => (f) => [
          [...f.filter(([k]) => k !== n), [n, v]],
          `${n}=${JSON.stringify(v).slice(0, 60)}`,
        ]),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(...names)
        .map((n): Change => (f) => [f.filter(([k]) => k !== n), `${n} left out`]),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(...names)
        .chain((n) => field(fields[n] as fc.Arbitrary<string>).map((v) => [n, v] as const))
        .map(([n, v]): Change => (f) => [[...f, [n, v]], `${n} given twice`]),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(oddText, oddText)
        .map(([k, v]): Change => (f) => [[...f, [k, v]], `extra field ${JSON.stringify(k).slice(0, 40)}`]),
    },
  );
  return fc
    .tuple(
      fc.record(Object.fromEntries(names.map((n) => [n, fields[n] as fc.Arbitrary<string>]))),
      fc.array(change, { maxLength: 3 }),
    )
    .map(([values, changes]) => {
      let form: Form = names.map((n) => [n, values[n] as string]);
      const why: string[] = [];
      for (const c of changes) {
        const [next, w] = c(form);
        form = next;
        why.push(w);
      }
      return { form, why };
    });
}

/** How the body goes: the form as a browser sends it, or as JSON, or in a type the endpoint does not read. */
const encoding = fc.oneof(
  { weight: 6, arbitrary: fc.constant("form") },
  { weight: 1, arbitrary: fc.constantFrom("json", "text", "multipart", "none", "oversized", "malformed") },
);

function encode(form: Form, how: string): { payload?: string; contentType?: string } {
  switch (how) {
    case "json":
      return { payload: jsonText(Object.fromEntries(form)), contentType: "application/json" };
    case "text":
      return { payload: formText(form), contentType: "text/plain" };
    case "multipart":
      return { payload: "--x\r\n\r\n--x--", contentType: "multipart/form-data; boundary=x" };
    case "none":
      return {};
    case "oversized":
      return {
        payload: `${formText(form)}&pad=${"x".repeat(17 * 1024)}`,
        contentType: "application/x-www-form-urlencoded",
      };
    case "malformed":
      return { payload: "%%%&=&a=%ZZ&%", contentType: "application/x-www-form-urlencoded" };
    default:
      return { payload: formText(form), contentType: "application/x-www-form-urlencoded" };
  }
}

/** The real value mostly, sometimes one of the others. */
const mostly = (real: string, ...others: string[]) =>
  fc.oneof({ weight: 5, arbitrary: fc.constant(real) }, { weight: 1, arbitrary: fc.constantFrom(...others) });

const addresses = fc.integer({ min: 1, max: 250 }).map((n) => `10.9.${n}.${n % 7}`);

interface Expectation {
  statuses: number[];
  /** JSON endpoints answer RFC 6749 errors: `{error, error_description}`. */
  json?: boolean;
  /** Redirects must go to one of these prefixes. */
  redirects?: string[];
}

function checkAnswer(res: LightMyRequestResponse, e: Expectation, secrets: string[]): string[] {
  const problems: string[] = [];
  const status = res.statusCode;
  if (status >= 500) problems.push(`answered ${status}`);
  else if (!e.statuses.includes(status))
    problems.push(`answered ${status}, not one of ${e.statuses.join(", ")}`);
  const type = String(res.headers["content-type"] ?? "");
  if (type.includes("text/html")) {
    if (/<x-injected|<script/i.test(res.body)) problems.push("the page echoes markup unescaped");
  } else if (e.json && status >= 400) {
    try {
      const b = JSON.parse(res.body) as Record<string, unknown>;
      if (
        typeof b.error !== "string" ||
        (b.error_description !== undefined && typeof b.error_description !== "string")
      )
        problems.push(`not an RFC 6749 error body: ${res.body.slice(0, 200)}`);
    } catch {
      problems.push(`the body is not JSON: ${res.body.slice(0, 200)}`);
    }
  }
  if (status >= 300 && status < 400) {
    const location = String(res.headers.location ?? "");
    if (/[\r\n]/.test(location)) problems.push("a Location header with a line break");
    const same = location.startsWith("/") && !location.startsWith("//") && !location.startsWith("/\\");
    if (!same && !(e.redirects ?? []).some((p) => location.startsWith(p)))
      problems.push(
        `redirects to ${location.slice(0, 120)}, not a registered redirect URI or a same-site path`,
      );
  }
  for (const s of secrets)
    if (s && res.body.includes(s)) problems.push(`the body holds a secret (${s.slice(0, 6)}…)`);
  return problems;
}

allowTime(t);

t.test(`OAuth forms, fuzzed (seed ${FUZZ_SEED}, ${FUZZ_RUNS} runs a form)`, async (t) => {
  const ta = await testApp(t, { env: { PUBLIC_URL: PUBLIC } });
  const { app, ctx } = ta;
  const db = ctx.stores.db;
  const ada = { email: "ada@example.com", password: "correct horse battery" };
  const fuzzUser = { email: "fuzz@example.com", password: "another long password" };
  const adaId = (await createUser(db, { email: ada.email, password: ada.password })).id as string;
  const fuzzId = (await createUser(db, { email: fuzzUser.email, password: fuzzUser.password })).id as string;
  const client = await registerClient(app);
  const tally = new Tally();
  const findings = new Findings();
  const secrets = [ada.password, fuzzUser.password, ctx.config.secret ?? ""];

  // a signed-in browser (the fuzz user) for the consent form, and its form's fields
  const browser = new Browser(app);
  const { challenge } = pkce();
  const consent = async () => {
    const page = await browser.get(authorizeUrl({ clientId: client.client_id, challenge }));
    return formFields(page.body);
  };
  await approve(browser, authorizeUrl({ clientId: client.client_id, challenge }), fuzzUser);
  const consentFields = await consent();
  t.ok(consentFields._csrf, "the consent form carries a CSRF token");

  const send = async (req: FormRequest, e: Expectation) => {
    const res = await app.inject({
      method: req.method,
      url: req.url,
      headers: req.headers,
      remoteAddress: req.remoteAddress,
      ...(req.payload === undefined ? {} : { payload: req.payload }),
    });
    tally.add(req.form, res.statusCode);
    for (const p of checkAnswer(res, e, secrets))
      findings.add(
        req.form,
        p,
        `${req.method} ${req.url.slice(0, 300)}\n  mutations: ${req.why.join("; ") || "none"}\n  body: ${(req.payload ?? "").slice(0, 400)}\n  answered ${res.statusCode}: ${res.body.slice(0, 400)}\n  - ${p}`,
      );
    return res;
  };
  const run = async <T>(
    name: string,
    arb: fc.Arbitrary<T>,
    body: (x: T) => Promise<unknown>,
    concurrency = 1,
  ) => {
    const started = Date.now();
    try {
      await runForm(name, arb, body, concurrency);
    } finally {
      timings.push(`${name}: ${Date.now() - started} ms`);
      progress(`oauth: ${name}: ${tally.rows.get(name)?.tried ?? 0} requests`);
    }
  };
  const timings: string[] = [];
  const runForm = async <T>(
    name: string,
    arb: fc.Arbitrary<T>,
    body: (x: T) => Promise<unknown>,
    concurrency: number,
  ) => {
    if (concurrency === 1) {
      await fc.assert(
        fc.asyncProperty(arb, async (x) => {
          await body(x);
          return true;
        }),
        { seed: seedFor(`oauth ${name}`), numRuns: FUZZ_RUNS },
      );
      return;
    }
    // forms that are slow on purpose (a failed sign-in waits 400 ms) run a few at a time, half as many
    const xs = fc.sample(arb, { seed: seedFor(`oauth ${name}`), numRuns: Math.ceil(FUZZ_RUNS / 2) });
    for (let i = 0; i < xs.length; i += concurrency)
      await Promise.all(xs.slice(i, i + concurrency).map(body));
  };

  // --- POST /oauth/register (JSON metadata) ---
  const uri = fc.oneof(
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        REDIRECT,
        "https://assistant.example/cb",
        "http://localhost:3000/cb",
        "http://[::1]:9/cb",
      ),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        "http://evil.example/cb",
        "javascript:alert(1)",
        "https://a.example/cb#frag",
        "http://127.0.0.1:99999/cb",
        `https://${"a".repeat(2100)}.example/`,
        "https://a.example/\u0000",
        "urn:ietf:wg:oauth:2.0:oob",
        "//a.example/cb",
      ),
    },
    { weight: 2, arbitrary: oddValue },
  );
  const metadataFields: Record<string, fc.Arbitrary<unknown>> = {
    redirect_uris: fc.oneof({ weight: 4, arbitrary: fc.array(uri, { maxLength: 12 }) }, oddValue),
    client_name: fc.oneof(oddText, fc.string(), oddValue, fc.constant(MARKUP)),
    token_endpoint_auth_method: fc.oneof(fc.constantFrom("none", "client_secret_basic"), oddValue),
    grant_types: fc.oneof(
      fc.constantFrom(["authorization_code"], ["refresh_token", "authorization_code"], ["implicit"]),
      oddValue,
    ),
    response_types: fc.oneof(fc.constantFrom(["code"], ["token"]), oddValue),
    scope: fc.oneof(fc.constantFrom("read", "write"), oddText),
    logo_uri: oddText,
    contacts: oddValue,
  };
  const metadata = fc
    .tuple(
      fc.constantFrom<Record<string, unknown>>(
        { redirect_uris: [REDIRECT] },
        {
          redirect_uris: ["https://assistant.example/cb", REDIRECT],
          client_name: "Assistant",
          token_endpoint_auth_method: "none",
        },
        {
          redirect_uris: [REDIRECT],
          grant_types: ["authorization_code", "refresh_token"],
          response_types: ["code"],
        },
      ),
      fc.array(
        fc.constantFrom(...Object.keys(metadataFields)).chain((k) =>
          fc.oneof(
            {
              weight: 4,
              arbitrary: (metadataFields[k] as fc.Arbitrary<unknown>).map((v) => [k, v] as const),
            },
            { weight: 1, arbitrary: fc.constant([k, undefined] as const) },
          ),
        ),
        { maxLength: 3 },
      ),
    )
    .map(([base, changes]) => {
      const m: Record<string, unknown> = { ...base };
      for (const [k, v] of changes) m[k] = v;
      return m;
    });
  await run(
    "POST /oauth/register",
    fc.tuple(
      fc.oneof(
        { weight: 8, arbitrary: metadata.map((m) => jsonText(m)) },
        fc.constantFrom(
          "",
          "{",
          "[]",
          "null",
          jsonText(nested(40, "object")),
          `{"redirect_uris":["${"x".repeat(17_000)}"]}`,
        ),
      ),
      fc.oneof(
        { weight: 8, arbitrary: fc.constant("application/json") },
        fc.constantFrom("text/plain", "application/x-www-form-urlencoded", "a/b"),
      ),
      addresses,
    ),
    ([payload, type, address]) =>
      send(
        {
          form: "POST /oauth/register",
          method: "POST",
          url: "/oauth/register",
          headers: { "content-type": type },
          payload,
          remoteAddress: address,
          why: [`content-type ${type}`],
        },
        { statuses: [201, 400, 413, 415, 429], json: true },
      ),
  );

  // --- POST /oauth/token (form) ---
  const freshCode = async () => {
    const p = pkce();
    const code = await issueCode(
      ctx,
      {
        clientId: client.client_id,
        clientName: "fuzz",
        redirectUri: REDIRECT,
        codeChallenge: p.challenge,
        state: null,
        resource: mcpResource(ctx),
        scope: "read",
      },
      fuzzId,
    );
    return { code, verifier: p.verifier };
  };
  const tokenForm = formOf({
    grant_type: fc.constantFrom(
      "authorization_code",
      "authorization_code",
      "refresh_token",
      "client_credentials",
    ),
    code: fc.constant("<fresh code>"),
    redirect_uri: mostly(REDIRECT, "https://other.example/cb"),
    client_id: mostly(client.client_id, "vgc_unknown"),
    code_verifier: fc.constant("<fresh verifier>"),
    resource: mostly(mcpResource(ctx), "https://other.example/mcp"),
    refresh_token: fc.constant("<fresh refresh>"),
  });
  let refresh: string | null = null;
  await run("POST /oauth/token", fc.tuple(tokenForm, encoding, addresses), async ([f, how, address]) => {
    const fresh = f.form.some(([, v]) => v.startsWith("<fresh")) ? await freshCode() : null;
    const form: Form = f.form.map(([k, v]) => [
      k,
      v === "<fresh code>"
        ? (fresh?.code ?? v)
        : v === "<fresh verifier>"
          ? (fresh?.verifier ?? v)
          : v === "<fresh refresh>"
            ? (refresh ?? v)
            : v,
    ]);
    const { payload, contentType } = encode(form, how);
    const res = await send(
      {
        form: "POST /oauth/token",
        method: "POST",
        url: "/oauth/token",
        headers: contentType ? { "content-type": contentType } : {},
        ...(payload === undefined ? {} : { payload }),
        remoteAddress: address,
        why: [...f.why, `sent as ${how}`],
      },
      { statuses: [200, 400, 401, 413, 415, 429], json: true },
    );
    if (res.statusCode === 200) refresh = (res.json() as { refresh_token?: string }).refresh_token ?? refresh;
  });

  // --- POST /oauth/revoke (form) ---
  await run(
    "POST /oauth/revoke",
    fc.tuple(
      formOf({
        token: fc.constantFrom("<refresh>", "abc"),
        client_id: fc.constant(client.client_id),
        token_type_hint: fc.constantFrom("refresh_token", "access_token"),
      }),
      encoding,
      addresses,
    ),
    async ([f, how, address]) => {
      const { payload, contentType } = encode(
        f.form.map(([k, v]) => [k, v === "<refresh>" ? (refresh ?? v) : v]),
        how,
      );
      await send(
        {
          form: "POST /oauth/revoke",
          method: "POST",
          url: "/oauth/revoke",
          headers: contentType ? { "content-type": contentType } : {},
          ...(payload === undefined ? {} : { payload }),
          remoteAddress: address,
          why: [...f.why, `sent as ${how}`],
        },
        { statuses: [200, 400, 401, 413, 415, 429], json: true },
      );
    },
  );

  // --- GET /oauth/authorize (query), signed in or not ---
  const authorizeFields = {
    response_type: mostly("code", "token"),
    client_id: mostly(client.client_id, "vgc_unknown"),
    redirect_uri: mostly(REDIRECT, "https://evil.example/cb", `${REDIRECT}/../x`),
    code_challenge: mostly(challenge, "short"),
    code_challenge_method: mostly("S256", "plain"),
    state: fc.constantFrom("xyz", "a b&c=d\r\nSet-Cookie: x=1", MARKUP),
    resource: mostly(mcpResource(ctx), "https://other.example/mcp"),
    scope: mostly("read", "read write", ""),
  };
  await run(
    "GET /oauth/authorize",
    fc.tuple(formOf(authorizeFields), fc.boolean()),
    async ([f, signedIn]) => {
      const cookie = signedIn ? [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; ") : "";
      await send(
        {
          form: "GET /oauth/authorize",
          method: "GET",
          url: `/oauth/authorize?${formText(f.form)}`,
          headers: cookie ? { cookie } : {},
          remoteAddress: "10.1.1.1",
          why: [...f.why, signedIn ? "signed in" : "signed out"],
        },
        // a URL over 8 KiB is a 414 before any route reads it (src/http/edge.ts)
        { statuses: [200, 302, 400, 414], redirects: [REDIRECT] },
      );
    },
  );

  // --- POST /oauth/authorize (the consent form, CSRF token and all) ---
  await run(
    "POST /oauth/authorize",
    fc.tuple(
      formOf({
        ...authorizeFields,
        _csrf: fc.constant(consentFields._csrf as string),
        decision: fc.constantFrom("approve", "deny"),
      }),
      encoding,
    ),
    async ([f, how]) => {
      const { payload, contentType } = encode(f.form, how);
      const cookie = [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
      await send(
        {
          form: "POST /oauth/authorize",
          method: "POST",
          url: "/oauth/authorize",
          headers: { cookie, ...(contentType ? { "content-type": contentType } : {}) },
          ...(payload === undefined ? {} : { payload }),
          remoteAddress: "10.1.1.2",
          why: [...f.why, `sent as ${how}`],
        },
        { statuses: [302, 400, 401, 403, 413, 415], redirects: [REDIRECT] },
      );
    },
  );

  // --- GET and POST /signin ---
  await run(
    "GET /signin",
    fc.oneof(
      oddText,
      fc.constantFrom(
        "/",
        "//evil.example",
        "/\\evil.example",
        "https://evil.example",
        MARKUP,
        `/x?${MARKUP}`,
      ),
    ),
    (returnTo) =>
      send(
        {
          form: "GET /signin",
          method: "GET",
          url: `/signin?return_to=${pct(returnTo)}`,
          headers: {},
          remoteAddress: "10.1.1.3",
          why: [`return_to ${JSON.stringify(returnTo).slice(0, 60)}`],
        },
        { statuses: [200, 400, 414] },
      ),
  );
  const signinPage = new Browser(app);
  const signinFields = formFields((await signinPage.get("/signin")).body);
  const signinCookie = [...signinPage.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  await run(
    "POST /signin",
    fc.tuple(
      formOf({
        _csrf: fc.constant(signinFields._csrf as string),
        email: fc.constantFrom(
          fuzzUser.email,
          "FUZZ@EXAMPLE.COM",
          " fuzz@example.com ",
          "nobody@example.com",
        ),
        password: fc.constantFrom(fuzzUser.password, "wrong", "x".repeat(2000)),
        return_to: fc.constantFrom(
          "/",
          "/oauth/authorize?x=1",
          "//evil.example",
          "https://evil.example",
          MARKUP,
        ),
      }),
      encoding,
      addresses,
    ),
    async ([f, how, address]) => {
      const { payload, contentType } = encode(f.form, how);
      await send(
        {
          form: "POST /signin",
          method: "POST",
          url: "/signin",
          headers: { cookie: signinCookie, ...(contentType ? { "content-type": contentType } : {}) },
          ...(payload === undefined ? {} : { payload }),
          remoteAddress: address,
          why: [...f.why, `sent as ${how}`],
        },
        { statuses: [303, 400, 401, 403, 413, 415, 429] },
      );
    },
    8,
  );

  // afterwards: a new client signs ada in, gets tokens and calls a tool
  const after = await registerClient(app, [REDIRECT], "after the fuzz");
  t.match(after, { client_id: /^vgc_/ }, "a client still registers");
  const p = pkce();
  const back = await approve(
    new Browser(app),
    authorizeUrl({ clientId: after.client_id, challenge: p.challenge }),
    ada,
  );
  const tokens = await tokenRequest(app, {
    grant_type: "authorization_code",
    code: back.searchParams.get("code") as string,
    redirect_uri: REDIRECT,
    client_id: after.client_id,
    code_verifier: p.verifier,
  });
  t.equal(tokens.statusCode, 200, "ada still signs in and gets tokens");
  const access = (tokens.json() as { access_token: string }).access_token;
  const tool = await app.inject({
    method: "POST",
    url: "/mcp",
    headers: {
      authorization: `Bearer ${access}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    payload: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "list_connections", arguments: {} },
    }),
  });
  t.equal(tool.statusCode, 200, "and her token calls a tool");
  t.notOk((tool.json() as { result?: { isError?: boolean } }).result?.isError, "which answers");
  void adaId;

  findings.report(t, "oauth");
  printTable(t, "4-oauth", tally.table(`OAuth requests tried per form (seed ${FUZZ_SEED})`));
  t.comment(timings.join("\n"));
});
