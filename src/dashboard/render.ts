import path from "node:path";
import { Eta } from "eta";
import type { FastifyReply } from "fastify";
import { packageRoot } from "../lib/paths.js";

/**
 * The dashboard's templates: Eta files in `views/` at the package root, every `<%= %>` escaped
 * (`<%~ %>` only for HTML the code built itself). A page template starts with
 * `<% layout("./layout", { title: "…", nav: "connections" }) %>`; the layout wraps it with the
 * header, the navigation and the sign-out form.
 */
export const VIEWS_DIR = path.join(packageRoot, "views");

const eta = new Eta({
  views: VIEWS_DIR,
  autoEscape: true,
  // templates are read once per process (edit-and-reload needs a restart, as code does)
  cache: true,
});

/** What every page's layout reads besides its own data. */
export interface PageFrame {
  /** The signed-in user, or null on public pages (first run, invitation). */
  user: { id: string; email: string } | null;
  /** The CSRF token every form carries as `_csrf`. */
  csrf: string;
  /** A message shown once at the top (after a redirect): `?notice=` values the page chose. */
  notice?: string | null;
}

/** Renders `view` with `data` and the frame, and answers with it. */
export function page(
  reply: FastifyReply,
  view: string,
  data: Record<string, unknown> & { frame: PageFrame },
  status = 200,
): FastifyReply {
  const html = eta.render(`./${view}`, data);
  return reply.code(status).type("text/html; charset=utf-8").header("cache-control", "no-store").send(html);
}

/** Renders a template to a string (partials built in code, tests). */
export const renderView = (view: string, data: Record<string, unknown>) => eta.render(`./${view}`, data);
