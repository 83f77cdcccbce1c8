import type { z } from "zod";
import { issueMessage } from "../core/issues.js";
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
  const input = value ?? (part === "body" ? undefined : {});
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const problems = r.error.issues.flatMap((i) =>
    i.code === "unrecognized_keys"
      ? i.keys.map((k) => ({
          field: [part, ...i.path.map(String), k].join("."),
          message: "is not a known field",
        }))
      : [
          {
            field: [part, ...i.path.map(String)].join("."),
            message: issueMessage(input, i, { query: part === "query" }),
          },
        ],
  );
  const first = problems[0] ?? { field: part, message: "is invalid" };
  throw new ApiError(400, "VALIDATION_ERROR", `${first.field}: ${first.message}`, { problems });
}
