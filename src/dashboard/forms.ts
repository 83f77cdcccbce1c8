import type { FastifyRequest } from "fastify";
import { ServiceError } from "../core/errors.js";

/**
 * Form helpers of the dashboard. A form posts url-encoded fields (16 KiB at most); `formOf` reads
 * them as strings (a repeated field, e.g. checkboxes, as an array through `formList`).
 * `fieldErrors` turns a core ServiceError into messages next to the fields they name, so the
 * dashboard shows the very messages the REST API gives.
 */
export function formOf(req: FastifyRequest): Record<string, string> {
  const body = (req.body ?? {}) as Record<string, unknown>;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) {
    if (k === "_csrf") continue;
    if (typeof v === "string") out[k] = v;
    else if (Array.isArray(v) && typeof v[0] === "string") out[k] = v[0];
  }
  return out;
}

export function formList(req: FastifyRequest, name: string): string[] {
  const v = ((req.body ?? {}) as Record<string, unknown>)[name];
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.filter((x): x is string => typeof x === "string");
  return [];
}

/** Messages by form field (`body.base_url` → `base_url`), and one for the form when no field is named. */
export interface FormErrors {
  fields: Record<string, string>;
  form: string | null;
}

export function fieldErrors(err: unknown): FormErrors {
  if (!(err instanceof ServiceError)) throw err;
  const fields: Record<string, string> = {};
  const field = err.field?.replace(/^(body|query|params)\./, "");
  if (field) {
    fields[field] = err.message.replace(new RegExp(`^${escapeRegExp(err.field ?? "")}:\\s*`), "");
    return { fields, form: null };
  }
  return { fields, form: err.message };
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The HTTP status a page answers a core error with (the same as REST's). */
export function statusOfError(err: ServiceError): number {
  switch (err.code) {
    case "invalid_input":
      return 400;
    case "unauthenticated":
      return 401;
    case "forbidden":
      return 403;
    case "not_found":
      return 404;
    case "conflict":
      return 409;
    case "too_large":
      return 413;
    case "rate_limited":
      return 429;
    case "unavailable":
      return 503;
  }
}
