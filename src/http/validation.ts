import type { z } from "zod";
import { ApiError } from "./errors.js";

/**
 * Parses one part of a request with its zod schema. A failure is a 400 whose message names
 * the first offending field ("query.limit: must be at most 100"), and whose details list all.
 */
export function parseOr400<S extends z.ZodType>(
  schema: S,
  value: unknown,
  part: "body" | "query" | "params",
): z.output<S> {
  const r = schema.safeParse(value ?? (part === "body" ? undefined : {}));
  if (r.success) return r.data;
  const problems = r.error.issues.flatMap((i) =>
    i.code === "unrecognized_keys"
      ? i.keys.map((k) => ({
          field: [part, ...i.path.map(String), k].join("."),
          message: "is not a known field",
        }))
      : [{ field: [part, ...i.path.map(String)].join("."), message: i.message }],
  );
  const first = problems[0] ?? { field: part, message: "is invalid" };
  throw new ApiError(400, "VALIDATION_ERROR", `${first.field}: ${first.message}`, { problems });
}
