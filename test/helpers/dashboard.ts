import type { FastifyInstance, LightMyRequestResponse } from "fastify";

/**
 * A browser without a browser, for the dashboard's in-process tests (`app.inject`): keeps the
 * cookies the pages set (and drops the ones they clear), asks for HTML, and posts url-encoded
 * forms, with the CSRF token (and one-time form id) of a page's form when `csrfFrom` names that
 * page (none: no token, to test the refusal). The real-browser tests are in test/browser/.
 */
export class FormClient {
  private readonly jar = new Map<string, string>();
  constructor(private readonly app: FastifyInstance) {}

  private take(res: LightMyRequestResponse) {
    const set = res.headers["set-cookie"];
    for (const c of Array.isArray(set) ? set : set ? [set] : []) {
      const [kv = ""] = c.split(";");
      const i = kv.indexOf("=");
      const value = kv.slice(i + 1);
      if (value === "" || /Max-Age=0|Expires=Thu, 01 Jan 1970/i.test(c)) this.jar.delete(kv.slice(0, i));
      else this.jar.set(kv.slice(0, i), value);
    }
    return res;
  }

  private get cookie() {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  async get(url: string) {
    return this.take(
      await this.app.inject({ method: "GET", url, headers: { cookie: this.cookie, accept: "text/html" } }),
    );
  }

  /** The hidden fields of the first form on `url`: its CSRF token and, where it has one, its one-time `form_id`. */
  async tokens(url: string) {
    const page = await this.get(url);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1];
    if (!csrf) throw new Error(`no form on ${url}: ${page.statusCode} ${page.body.slice(0, 300)}`);
    const formId = /name="form_id" value="([^"]+)"/.exec(page.body)?.[1];
    return { _csrf: csrf, ...(formId ? { form_id: formId } : {}) };
  }

  /** Posts a form; `csrfFrom` is a page whose form tokens are sent (none: no token). */
  async post(url: string, form: Record<string, string>, csrfFrom?: string) {
    const fields = { ...(csrfFrom ? await this.tokens(csrfFrom) : {}), ...form };
    return this.take(
      await this.app.inject({
        method: "POST",
        url,
        headers: {
          cookie: this.cookie,
          "content-type": "application/x-www-form-urlencoded",
          accept: "text/html",
        },
        payload: new URLSearchParams(fields).toString(),
      }),
    );
  }

  /** Signs in through /signin (its form and CSRF token); throws unless it redirects. */
  async signIn(email: string, password: string, returnTo = "/connections") {
    const r = await this.post("/signin", { email, password, return_to: returnTo }, "/signin");
    if (r.statusCode !== 303) throw new Error(`sign-in failed: ${r.statusCode}`);
  }

  /** A client signed in as `email`. */
  static async signedIn(app: FastifyInstance, email: string, password: string, returnTo?: string) {
    const b = new FormClient(app);
    await b.signIn(email, password, returnTo);
    return b;
  }
}
