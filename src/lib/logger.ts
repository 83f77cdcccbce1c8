import { pino } from "pino";

/**
 * Credentials never reach the log: request headers that carry keys and any body field that
 * holds a secret are censored wherever they appear in a logged object.
 */
export const redactPaths = [
  "req.headers.authorization",
  'req.headers["x-n8n-api-key"]',
  "headers.authorization",
  "*.api_key",
  "*.api_token",
  "*.password",
  "*.key",
  "*.secret",
  "api_key",
  "api_token",
  "password",
];

export function createLogger(level: string, destination?: NodeJS.WritableStream) {
  return pino(
    {
      level,
      redact: { paths: redactPaths, censor: "[redacted]" },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination as pino.DestinationStream | undefined,
  );
}
