import fastifyMultipart, { type MultipartFile } from "@fastify/multipart";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { listConnections } from "../../connections/list.js";
import type { AppContext } from "../../core/context.js";
import { invalidInput, notFound, ServiceError } from "../../core/errors.js";
import { issueMessage } from "../../core/issues.js";
import { listMyOrganizations } from "../../identity/organizations.js";
import {
  createStatusPage,
  deleteStatusPage,
  getStatusPage,
  listStatusPages,
  type StatusPage,
  updateStatusPage,
} from "../../status-pages/pages.js";
import { addPostUpdate, createPost, listPosts, removePost } from "../../status-pages/posts.js";
import { POST_STATUSES } from "../../status-pages/public-model.js";
import { POST_STATUS_WORDS } from "../../status-pages/render/words.js";
import {
  createPostBody,
  createStatusPageBody,
  createUpdateBody,
  MAX_COMPONENTS,
  MAX_LOGO_BYTES,
  updateStatusPageBody,
} from "../../status-pages/schema.js";
import { fieldErrors, type FormErrors, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * Status pages (issue #34; docs/dashboard.md, docs/status-pages.md): the public pages the
 * signed-in user sees, a form to create one and to change it (its components as rows of group,
 * connection and public name), and per page its public incident posts: write one, add an update,
 * remove one. Every read and write is the core's (src/status-pages/pages.ts and posts.ts), the
 * functions REST calls, with the body checked by REST's own schema, so a bad field gets the API's
 * message and a refused change the core's status and message.
 *
 * The create and settings forms carry a logo file, so they alone post multipart/form-data: the
 * parser (@fastify/multipart) is registered in a scope of their own two routes, and every other
 * form and the REST API read url-encoded or JSON bodies as before. The file becomes the data URL
 * REST takes (`data:<type>;base64,…`), so whether it is an image and of which type is the core's
 * check (checkLogo), said next to the field; only a file over the limit is said here, since just
 * its first MAX_LOGO_BYTES are kept.
 */

const NOTICES: Record<string, string> = {
  created: "The status page was created: visitors can open it now.",
  saved: "The status page was saved: visitors see the change now.",
  deleted: "The status page was deleted: its public page, feed and badges are gone.",
  posted: "The incident post is published on the public page.",
  updated: "The update is published on the public page.",
  removed: "The incident post was removed from the public page.",
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Empty component rows offered below the page's own (save to get more). */
const SPARE_ROWS = 5;
/** Rows read from a form: every component a page may have, and the spare ones. */
const MAX_ROWS = MAX_COMPONENTS + SPARE_ROWS;
/**
 * These forms' body limit: up to 105 rows of group, connection and name, or a 5,000-character
 * message, url-encoded (the dashboard's 16 KiB holds about 60 rows, or a message in plain ASCII).
 */
const FORM_LIMIT = 128 * 1024;
/** Fields of the settings form: the rows' three each, the page's own and a few to spare. */
const MAX_FIELDS = 3 * MAX_ROWS + 20;
/** Longest field of a multipart form, in bytes: the description cut at 4,000 characters, in UTF-8. */
const MAX_FIELD_BYTES = 16 * 1024;
/**
 * Largest multipart request read at all. Up to this a file over MAX_LOGO_BYTES is read and thrown
 * away (busboy stops keeping it at the limit), so a photo of a few MiB chosen by mistake gets the
 * form back with its message; a request declaring more (Content-Length) gets the error page before
 * a byte is parsed.
 */
const MAX_UPLOAD = 20 * 1024 * 1024;

/** The logo's file input as posted: what the browser declared, and the bytes unless there are too many. */
interface LogoUpload {
  filename: string;
  mimetype: string;
  bytes: Buffer;
  /** Larger than MAX_LOGO_BYTES: `bytes` holds only the first of them. */
  tooLarge: boolean;
}

/** One component row as typed. */
interface RowForm {
  group: string;
  connection_id: string;
  display_name: string;
}

/** The settings form as typed. */
interface PageForm {
  organization_id: string;
  slug: string;
  title: string;
  description: string;
  show_response_times: boolean;
  custom_domain: string;
  remove_logo: boolean;
  /** The name of a logo file sent with a form that was refused: the browser does not keep it. */
  logo_file: string;
  rows: RowForm[];
}

interface PostForm {
  title: string;
  status: string;
  message: string;
}

/** An update form as typed, and the post it is for. */
interface UpdateForm {
  post_id: string;
  status: string;
  message: string;
}

const emptyErrors = (): FormErrors => ({ fields: {}, form: null });
const hasErrors = (e: FormErrors) => Boolean(e.form) || Object.keys(e.fields).length > 0;
const emptyRow = (): RowForm => ({ group: "", connection_id: "", display_name: "" });
const withSpare = (rows: RowForm[]) => [...rows, ...Array.from({ length: SPARE_ROWS }, emptyRow)];

function emptyForm(): PageForm {
  return {
    organization_id: "",
    slug: "",
    title: "",
    description: "",
    show_response_times: false,
    custom_domain: "",
    remove_logo: false,
    logo_file: "",
    rows: withSpare([]),
  };
}

/** The settings form of a stored page: its components as rows, in order, and spare rows. */
function formOfPage(p: StatusPage): PageForm {
  return {
    organization_id: p.organization_id ?? "",
    slug: p.slug,
    title: p.title,
    description: p.description ?? "",
    show_response_times: p.show_response_times,
    custom_domain: p.custom_domain ?? "",
    remove_logo: false,
    logo_file: "",
    rows: withSpare(
      p.groups.flatMap((g) =>
        g.components.map((c) => ({
          group: g.name,
          connection_id: c.connection_id,
          display_name: c.display_name,
        })),
      ),
    ),
  };
}

/** The settings form as posted (each text cut at a length no field allows, so a huge one is still refused). */
function readPageForm(req: FastifyRequest): PageForm {
  const f = formOf(req);
  const s = (k: string, max = 600) => (f[k] ?? "").slice(0, max);
  const count = Math.min(Math.max(Number.parseInt(f.rows ?? "0", 10) || 0, 0), MAX_ROWS);
  const rows: RowForm[] = [];
  for (let i = 0; i < count; i++)
    rows.push({
      group: s(`group_${i}`, 200),
      connection_id: s(`connection_${i}`, 100),
      display_name: s(`display_${i}`, 200),
    });
  return {
    organization_id: s("organization_id", 100),
    slug: s("slug", 100),
    title: s("title", 300),
    description: s("description", 4000),
    show_response_times: f.show_response_times === "on",
    custom_domain: s("custom_domain", 300),
    remove_logo: f.remove_logo === "on",
    logo_file: logoOf(req)?.filename.slice(0, 200) ?? "",
    rows,
  };
}

/**
 * Reads the one file a settings form may carry into memory, up to MAX_LOGO_BYTES (busboy stops
 * keeping bytes at the limit and marks the stream truncated), as the part's value in the body.
 */
async function readLogoPart(part: MultipartFile): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of part.file) chunks.push(chunk as Buffer);
  const upload: LogoUpload = {
    filename: part.filename,
    mimetype: part.mimetype,
    bytes: Buffer.concat(chunks),
    tooLarge: part.file.truncated,
  };
  part.value = upload;
}

/** The logo file of a multipart form, or null: none posted, or the input left empty (keep the logo). */
function logoOf(req: FastifyRequest): LogoUpload | null {
  const v = (req.body as Record<string, unknown> | undefined)?.logo;
  if (typeof v !== "object" || v === null || !("bytes" in v)) return null;
  const u = v as LogoUpload;
  // an empty file input is sent as a part with no file name and no bytes
  return u.filename === "" && u.bytes.length === 0 ? null : u;
}

/**
 * A multipart form's text fields together, held to the url-encoded form's limit (busboy counts
 * fields and cuts each one, not their sum): the error page's 413, as for a url-encoded form.
 */
function checkFieldBytes(req: FastifyRequest): void {
  if (!req.isMultipart()) return;
  let n = 0;
  for (const [k, v] of Object.entries((req.body ?? {}) as Record<string, unknown>))
    for (const x of Array.isArray(v) ? v : [v])
      if (typeof x === "string") n += Buffer.byteLength(k) + Buffer.byteLength(x) + 2;
  if (n > FORM_LIMIT)
    throw new ServiceError(
      "too_large",
      `The form's fields are larger than ${FORM_LIMIT / 1024} KiB; nothing was changed. Shorten the fields and try again.`,
    );
}

/** Where each component of the body came from: `rowOf[group][component]` and each group's first row. */
interface RowMap {
  rowOf: number[][];
  firstRow: number[];
}

/**
 * The REST body of the settings form. Rows with a connection are components; rows with the same
 * group name form one group, in the order the names first appear. A row with a name but no
 * connection is refused (it would be dropped silently otherwise).
 */
function bodyOf(
  form: PageForm,
  create: boolean,
  logo: LogoUpload | null,
): { body: Record<string, unknown>; map: RowMap } {
  const groups: { name: string; components: { connection_id: string; display_name: string }[] }[] = [];
  const map: RowMap = { rowOf: [], firstRow: [] };
  const at = new Map<string, number>();
  form.rows.forEach((r, i) => {
    if (!r.connection_id) {
      if (r.group.trim() || r.display_name.trim())
        throw invalidInput(`rows.${i}.connection_id`, "choose a connection for this row, or clear its names");
      return;
    }
    const key = r.group.trim();
    let gi = at.get(key);
    if (gi === undefined) {
      gi = groups.length;
      at.set(key, gi);
      groups.push({ name: r.group, components: [] });
      map.rowOf.push([]);
      map.firstRow.push(i);
    }
    groups[gi]?.components.push({ connection_id: r.connection_id, display_name: r.display_name });
    map.rowOf[gi]?.push(i);
  });
  const body: Record<string, unknown> = {
    slug: form.slug,
    title: form.title,
    description: form.description.trim() ? form.description : null,
    show_response_times: form.show_response_times,
    custom_domain: form.custom_domain.trim() ? form.custom_domain : null,
    groups,
  };
  if (create && form.organization_id) body.organization_id = form.organization_id;
  if (!create && form.remove_logo) {
    if (logo) throw invalidInput("body.logo", "choose a new file or remove the logo, not both");
    body.logo = null;
  }
  if (logo) {
    // the size is the one check the core cannot make: only the first MAX_LOGO_BYTES were kept
    if (logo.tooLarge)
      throw new ServiceError(
        "too_large",
        `body.logo: ${logo.filename || "the file"} is larger than ${MAX_LOGO_BYTES / 1024} KiB, the most a logo may be; choose a smaller file`,
        { field: "body.logo" },
      );
    body.logo = `data:${logo.mimetype};base64,${logo.bytes.toString("base64")}`;
  }
  return { body, map };
}

/**
 * A form through a REST body schema: the first problem as the API words it, as a ServiceError
 * naming the field (`body.groups.0.name`), so `fieldErrors` puts it next to the field.
 */
function parseBody<S extends z.ZodType>(schema: S, input: Record<string, unknown>): z.output<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data as z.output<S>;
  const issue = r.error.issues[0];
  if (!issue) throw invalidInput("body", "is invalid");
  const field = ["body", ...issue.path.map(String)].join(".");
  throw new ServiceError("invalid_input", `${field}: ${issueMessage(input, issue)}`, { field });
}

/**
 * Errors by form field. A group's or a component's field (`groups.1.components.0.display_name`)
 * becomes its row's (`row-4-display`); the groups as a whole (too many) the components table's.
 * A slug or domain another page holds (409) is said next to that field.
 */
function settingsErrors(err: unknown, map: RowMap | null): FormErrors {
  const e = fieldErrors(err);
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(e.fields)) {
    const row = /^rows\.(\d+)\.connection_id$/.exec(k);
    const comp = /^groups\.(\d+)\.components\.(\d+)\.(connection_id|display_name)$/.exec(k);
    const group = /^groups\.(\d+)\.name$/.exec(k);
    if (row) fields[`row-${row[1]}-connection`] = v;
    else if (comp && map) {
      const i = map.rowOf[Number(comp[1])]?.[Number(comp[2])];
      if (i === undefined) fields.groups = v;
      else fields[`row-${i}-${comp[3] === "display_name" ? "display" : "connection"}`] = v;
    } else if (group && map) {
      const i = map.firstRow[Number(group[1])];
      fields[i === undefined ? "groups" : `row-${i}-group`] = v;
    } else if (k.startsWith("groups")) fields.groups = v;
    else fields[k] = v;
  }
  if (err instanceof ServiceError && err.code === "conflict" && e.form) {
    if (/custom domain/i.test(e.form)) return { fields: { ...fields, custom_domain: e.form }, form: null };
    if (/slug/i.test(e.form)) return { fields: { ...fields, slug: e.form }, form: null };
  }
  return { fields, form: e.form };
}

/** The status page id of a path: 404 for a malformed one, as for one the user does not see. */
function idOf(raw: string, what = "Status page"): string {
  if (!UUID.test(raw)) throw notFound(`${what} ${raw.slice(0, 40)} not found`);
  return raw.toLowerCase();
}

/** The core's 404 for the status page itself (not for a connection or a post named in the form). */
const pageGone = (err: ServiceError) => err.code === "not_found" && err.message.startsWith("Status page");

const noticeOf = (req: FastifyRequest, failed: boolean) =>
  failed ? null : (NOTICES[String((req.query as Record<string, unknown> | undefined)?.notice ?? "")] ?? null);

const componentCount = (p: StatusPage) => p.groups.reduce((n, g) => n + g.components.length, 0);

/** Connections for the rows' selects, by account (those of `only` when it is given: an edit's page account). */
async function connectionChoices(ctx: AppContext, req: FastifyRequest, only?: string | null) {
  // an edit's page: its own account's connections only, so an older one of a busy user is still listed
  const { rows } = await listConnections(ctx, dashboardActor(req), {
    limit: 500,
    offset: 0,
    ...(only !== undefined ? { organizationId: only ?? "personal" } : {}),
  });
  const accounts = new Map<string, { label: string; options: { id: string; name: string }[] }>();
  for (const c of rows) {
    const key = c.organization_id ?? "";
    if (only !== undefined && key !== (only ?? "")) continue;
    const a = accounts.get(key) ?? {
      label: c.organizations ? `Organization: ${c.organizations.name}` : "Personal",
      options: [],
    };
    a.options.push({ id: c.id, name: c.service_name });
    accounts.set(key, a);
  }
  return [...accounts.values()];
}

const POST_STATUS_OPTIONS = POST_STATUSES.map((s) => [s, POST_STATUS_WORDS[s]] as const);

export async function registerStatusPagePages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const listPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    s: { form?: PageForm; errors?: FormErrors; status?: number } = {},
  ) => {
    const actor = dashboardActor(req);
    const [{ status_pages: pages }, orgs, connections] = await Promise.all([
      listStatusPages(ctx, actor),
      listMyOrganizations(ctx, actor),
      connectionChoices(ctx, req),
    ]);
    const posts = await Promise.all(pages.map((p) => listPosts(ctx, actor, p.id)));
    const orgNames = new Map(orgs.map((o) => [o.id, o.name]));
    const errors = s.errors ?? emptyErrors();
    return page(
      reply,
      "status-pages/index",
      {
        frame: frameOf(req, reply, noticeOf(req, hasErrors(errors))),
        pages: pages.map((p, i) => ({
          id: p.id,
          title: p.title,
          slug: p.slug,
          url: p.url,
          account: p.organization_id ? (orgNames.get(p.organization_id) ?? p.organization_id) : "Personal",
          components: componentCount(p),
          active: (posts[i]?.incidents ?? []).filter((x) => x.status !== "resolved").length,
        })),
        // a page of an organization is its admins' and owners' to create
        organizations: orgs
          .filter((o) => o.role === "admin" || o.role === "owner")
          .map((o) => ({ id: o.id, name: o.name, role: o.role })),
        connections,
        form: s.form ?? emptyForm(),
        errors,
        publicBase: `${ctx.config.publicUrl}/status/`,
      },
      s.status ?? 200,
    );
  };

  const editPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    id: string,
    s: { form?: PageForm; errors?: FormErrors; deleteError?: string | null; status?: number } = {},
  ) => {
    const p = await getStatusPage(ctx, dashboardActor(req), id);
    const errors = s.errors ?? emptyErrors();
    return page(
      reply,
      "status-pages/edit",
      {
        frame: frameOf(req, reply, noticeOf(req, hasErrors(errors) || Boolean(s.deleteError))),
        p,
        connections: await connectionChoices(ctx, req, p.organization_id),
        form: s.form ?? formOfPage(p),
        errors,
        deleteError: s.deleteError ?? null,
        publicBase: `${ctx.config.publicUrl}/status/`,
      },
      s.status ?? 200,
    );
  };

  const postsPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    id: string,
    s: {
      post?: PostForm;
      postErrors?: FormErrors;
      update?: UpdateForm;
      updateErrors?: FormErrors;
      listError?: string | null;
      status?: number;
    } = {},
  ) => {
    const actor = dashboardActor(req);
    const [p, { incidents }, orgs] = await Promise.all([
      getStatusPage(ctx, actor, id),
      listPosts(ctx, actor, id),
      listMyOrganizations(ctx, actor),
    ]);
    const postErrors = s.postErrors ?? emptyErrors();
    const updateErrors = s.updateErrors ?? emptyErrors();
    const failed = hasErrors(postErrors) || hasErrors(updateErrors) || Boolean(s.listError);
    return page(
      reply,
      "status-pages/detail",
      {
        frame: frameOf(req, reply, noticeOf(req, failed)),
        p,
        account: p.organization_id
          ? (orgs.find((o) => o.id === p.organization_id)?.name ?? p.organization_id)
          : "Personal",
        components: componentCount(p),
        open: incidents.filter((x) => x.status !== "resolved"),
        resolved: incidents.filter((x) => x.status === "resolved"),
        statuses: POST_STATUS_OPTIONS,
        words: POST_STATUS_WORDS,
        post: s.post ?? { title: "", status: "investigating", message: "" },
        postErrors,
        update: s.update ?? null,
        updateErrors,
        listError: s.listError ?? null,
      },
      s.status ?? 200,
    );
  };

  scope.get("/status-pages", async (req, reply) => listPage(req, reply));

  scope.get<{ Params: { id: string } }>("/status-pages/:id", async (req, reply) =>
    postsPage(req, reply, idOf(req.params.id)),
  );

  scope.get<{ Params: { id: string } }>("/status-pages/:id/edit", async (req, reply) =>
    editPage(req, reply, idOf(req.params.id)),
  );

  // The two forms with a logo file, in a scope of their own: the only routes that read multipart.
  // The body is parsed in preValidation (attachFieldsToBody), so `_csrf` is in req.body when the
  // CSRF check, a preHandler, reads it; the session check and the error page are the dashboard's.
  await scope.register(async (forms) => {
    forms.addHook("onRequest", async (req) => {
      if (Number(req.headers["content-length"] ?? 0) > MAX_UPLOAD)
        throw new ServiceError(
          "too_large",
          `The form is larger than ${MAX_UPLOAD / 1024 / 1024} MiB; nothing was changed. A logo may be at most ${MAX_LOGO_BYTES / 1024} KiB: choose a smaller file.`,
        );
    });
    await forms.register(fastifyMultipart, {
      attachFieldsToBody: "keyValues",
      onFile: readLogoPart,
      // a file over the limit is cut and marked, not an error: the form says so next to the field
      throwFileSizeLimit: false,
      limits: {
        fileSize: MAX_LOGO_BYTES,
        files: 1,
        fields: MAX_FIELDS,
        parts: MAX_FIELDS + 1,
        fieldSize: MAX_FIELD_BYTES,
        fieldNameSize: 100,
        headerPairs: 20,
      },
    });

    forms.post(
      "/status-pages",
      { preHandler: forms.csrfProtection, bodyLimit: FORM_LIMIT },
      async (req, reply) => {
        checkFieldBytes(req);
        const form = readPageForm(req);
        let map: RowMap | null = null;
        let created: StatusPage;
        try {
          const b = bodyOf(form, true, logoOf(req));
          map = b.map;
          created = await createStatusPage(ctx, dashboardActor(req), parseBody(createStatusPageBody, b.body));
        } catch (err) {
          if (!(err instanceof ServiceError)) throw err;
          return listPage(req, reply, {
            form,
            errors: settingsErrors(err, map),
            status: statusOfError(err),
          });
        }
        return reply.code(303).header("location", `/status-pages/${created.id}?notice=created`).send();
      },
    );

    forms.post<{ Params: { id: string } }>(
      "/status-pages/:id/edit",
      { preHandler: forms.csrfProtection, bodyLimit: FORM_LIMIT },
      async (req, reply) => {
        const id = idOf(req.params.id);
        checkFieldBytes(req);
        const form = readPageForm(req);
        let map: RowMap | null = null;
        try {
          const b = bodyOf(form, false, logoOf(req));
          map = b.map;
          await updateStatusPage(ctx, dashboardActor(req), id, parseBody(updateStatusPageBody, b.body));
        } catch (err) {
          // the page gone or never seen: the 404 page (a connection not found is the form's message)
          if (!(err instanceof ServiceError) || pageGone(err)) throw err;
          return editPage(req, reply, id, {
            form,
            errors: settingsErrors(err, map),
            status: statusOfError(err),
          });
        }
        return reply.code(303).header("location", `/status-pages/${id}/edit?notice=saved`).send();
      },
    );
  });

  scope.post<{ Params: { id: string } }>(
    "/status-pages/:id/delete",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const id = idOf(req.params.id);
      try {
        await deleteStatusPage(ctx, dashboardActor(req), id);
      } catch (err) {
        // an organization's page, as a member: the core's 403, said at the delete button
        if (!(err instanceof ServiceError) || err.code !== "forbidden") throw err;
        return editPage(req, reply, id, { deleteError: err.message, status: statusOfError(err) });
      }
      return reply.code(303).header("location", "/status-pages?notice=deleted").send();
    },
  );

  scope.post<{ Params: { id: string } }>(
    "/status-pages/:id/posts",
    { preHandler: scope.csrfProtection, bodyLimit: FORM_LIMIT },
    async (req, reply) => {
      const id = idOf(req.params.id);
      const f = formOf(req);
      const post: PostForm = {
        title: (f.title ?? "").slice(0, 1000),
        status: (f.status ?? "").slice(0, 50),
        message: (f.message ?? "").slice(0, 10_000),
      };
      try {
        await createPost(ctx, dashboardActor(req), id, parseBody(createPostBody, { ...post }));
      } catch (err) {
        if (!(err instanceof ServiceError) || pageGone(err)) throw err;
        return postsPage(req, reply, id, { post, postErrors: fieldErrors(err), status: statusOfError(err) });
      }
      return reply.code(303).header("location", `/status-pages/${id}?notice=posted`).send();
    },
  );

  scope.post<{ Params: { id: string; post: string } }>(
    "/status-pages/:id/posts/:post/updates",
    { preHandler: scope.csrfProtection, bodyLimit: FORM_LIMIT },
    async (req, reply) => {
      const id = idOf(req.params.id);
      const postId = idOf(req.params.post, "Incident post");
      const f = formOf(req);
      const update: UpdateForm = {
        post_id: postId,
        status: (f.status ?? "").slice(0, 50),
        message: (f.message ?? "").slice(0, 10_000),
      };
      try {
        await addPostUpdate(
          ctx,
          dashboardActor(req),
          id,
          postId,
          parseBody(createUpdateBody, { status: update.status, message: update.message }),
        );
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        // the page gone: the 404 page; the post gone meanwhile: said on the list
        if (pageGone(err)) throw err;
        if (err.code === "not_found")
          return postsPage(req, reply, id, { listError: err.message, status: statusOfError(err) });
        return postsPage(req, reply, id, {
          update,
          updateErrors: fieldErrors(err),
          status: statusOfError(err),
        });
      }
      return reply.code(303).header("location", `/status-pages/${id}?notice=updated#post-${postId}`).send();
    },
  );

  scope.post<{ Params: { id: string; post: string } }>(
    "/status-pages/:id/posts/:post/delete",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const id = idOf(req.params.id);
      const postId = idOf(req.params.post, "Incident post");
      try {
        await removePost(ctx, dashboardActor(req), id, postId);
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        if (pageGone(err)) throw err;
        return postsPage(req, reply, id, { listError: err.message, status: statusOfError(err) });
      }
      return reply.code(303).header("location", `/status-pages/${id}?notice=removed`).send();
    },
  );
}
