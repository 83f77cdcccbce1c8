import { z } from "zod";

/** One invalid entry of a usage batch (POST /v1/usage), as the spec's `validation_errors`. */
const validationErrors = z
  .array(z.object({ index: z.number().int(), field: z.string(), message: z.string() }))
  .optional()
  .describe("usage batches only: the first problem of each invalid entry");

/** The connection and heartbeat endpoints' error body (spec: Errors). */
export const simpleError = z.object({ error: z.string(), validation_errors: validationErrors });

/** The envelope every other endpoint (and every authentication failure) answers with. */
export const envelopeError = z.object({
  success: z.literal(false),
  error: z.object({
    code: z
      .string()
      .describe(
        "VALIDATION_ERROR, INVALID_CURSOR, INVALID_API_KEY, FORBIDDEN, NOT_FOUND, PAYLOAD_TOO_LARGE, RATE_LIMITED, SERVICE_UNAVAILABLE, …",
      ),
    message: z.string(),
    details: z.record(z.string(), z.unknown()),
  }),
  validation_errors: validationErrors,
});
