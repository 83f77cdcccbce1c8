import type { z } from "zod";

/**
 * What a user reads for one schema problem, the same at every door: a field that is simply absent
 * "is required" (whatever the schema says of a wrong value), a query parameter sent twice "is given
 * more than once", an unknown field "is not a known field"; otherwise the schema's own message.
 */
export function issueMessage(
  input: unknown,
  issue: z.core.$ZodIssue,
  opts: { query?: boolean } = {},
): string {
  if (issue.code === "unrecognized_keys") return "is not a known field";
  if (isMissing(input, issue.path))
    // keep what the schema says a value must be ("must be one of …"), when it says something
    return /^must /.test(issue.message) ? `is required; it ${issue.message}` : "is required";
  if (opts.query && Array.isArray(valueAt(input, issue.path))) return "is given more than once; send it once";
  return issue.message;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = root;
  for (const k of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

/** Whether the field at `path` is absent from an object that is there (or the whole input is). */
function isMissing(root: unknown, path: readonly PropertyKey[]): boolean {
  if (path.length === 0) return root === undefined;
  const parent = valueAt(root, path.slice(0, -1));
  if (parent === null || typeof parent !== "object" || Array.isArray(parent)) return false;
  return (parent as Record<PropertyKey, unknown>)[path[path.length - 1] as PropertyKey] === undefined;
}
