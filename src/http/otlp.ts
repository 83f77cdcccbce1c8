import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { IngestionKeyActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { ServiceError } from "../core/errors.js";
import { decodeMetricsRequest, decodeTracesRequest } from "../otlp/decode.js";
import {
  encodeMetricsResponse,
  encodeStatus,
  encodeTracesResponse,
  type ExportOutcome,
  RpcCode,
} from "../otlp/encode.js";
import { ingestOtlpMetrics, ingestOtlpTraces } from "../otlp/ingest.js";
import type { OtlpEncoding } from "../otlp/types.js";
import { actorOf } from "./auth.js";
import { ApiError } from "./errors.js";

/**
 * OTLP/HTTP (issue #35; docs/otlp.md): `POST /v1/otlp/v1/metrics` and `POST /v1/otlp/v1/traces`,
 * so an exporter configured with `OTEL_EXPORTER_OTLP_ENDPOINT=https://vigil.example/v1/otlp` and
 * `OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <ingestion key>` sends here.
 *
 * As the OTLP specification says: bodies in binary protobuf (`application/x-protobuf`) or OTLP/JSON
 * (`application/json`), optionally gzip-compressed; answers in the request's encoding: 200 with
 * an Export…ServiceResponse (its partial_success naming what was rejected or ignored), every
 * error with a google.rpc.Status; 429 and 503 with Retry-After, which exporters wait for before
 * they retry. The gateway's usage-ingestion key authenticates, as for heartbeats.
 */

/** Largest body read, after decompression (an exporter's batch of 100s of series is far below). */
export const OTLP_BODY_LIMIT = 8 * 1024 * 1024;
/** Seconds an exporter is told to wait on a 503 (well within an exporter's 10 s export timeout). */
const RETRY_AFTER_SECONDS = 2;

const PROTOBUF = "application/x-protobuf";
const JSON_TYPE = "application/json";

/** The encoding a request's Content-Type names (JSON only when it says so). */
function encodingOf(req: FastifyRequest): OtlpEncoding {
  const type = req.headers["content-type"] ?? "";
  return /^application\/json\b/i.test(type) ? "json" : "protobuf";
}

const GRPC_OF_STATUS: Record<number, number> = {
  400: RpcCode.INVALID_ARGUMENT,
  401: RpcCode.UNAUTHENTICATED,
  403: RpcCode.PERMISSION_DENIED,
  413: RpcCode.INVALID_ARGUMENT,
  415: RpcCode.INVALID_ARGUMENT,
  429: RpcCode.RESOURCE_EXHAUSTED,
  503: RpcCode.UNAVAILABLE,
};

function send(reply: FastifyReply, status: number, body: Buffer, encoding: OtlpEncoding) {
  return reply
    .code(status)
    .header("Content-Type", encoding === "json" ? JSON_TYPE : PROTOBUF)
    .send(body);
}

/** Registers both endpoints in their own scope: their body parsers and error bodies are OTLP's. */
export async function registerOtlp(
  app: FastifyInstance,
  ctx: AppContext,
  toApiError: (err: unknown, bodyLimit?: number) => ApiError,
): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser([PROTOBUF, JSON_TYPE], { parseAs: "buffer" }, (_req, body, done) =>
      done(null, body),
    );
    scope.addContentTypeParser("*", (req, _payload, done) =>
      done(
        new ApiError(
          415,
          "UNSUPPORTED_MEDIA_TYPE",
          `Content-Type ${req.headers["content-type"] ?? "(none)"} is not OTLP/HTTP: send ${PROTOBUF} or ${JSON_TYPE}.`,
        ),
      ),
    );
    // gzip (as exporters send it) is undone before the parser by @fastify/compress (app.ts), for
    // every route; the body limit applies to the decompressed body. Content codings are
    // case-insensitive (RFC 9110 §8.4.1); the plugin compares them as written.
    scope.addHook("onRequest", (req, _reply, done) => {
      const enc = req.headers["content-encoding"];
      if (typeof enc === "string") req.headers["content-encoding"] = enc.toLowerCase();
      done();
    });
    scope.setErrorHandler((err, req, reply) => {
      const encoding = encodingOf(req);
      let apiErr: ApiError;
      const e = err as { code?: string };
      if (e.code === "Z_DATA_ERROR" || e.code === "Z_BUF_ERROR")
        apiErr = new ApiError(
          400,
          "VALIDATION_ERROR",
          "The body is not valid gzip (Content-Encoding: gzip).",
        );
      else if (err instanceof ServiceError && err.code === "invalid_input")
        apiErr = new ApiError(400, "VALIDATION_ERROR", err.message);
      else apiErr = toApiError(err, OTLP_BODY_LIMIT);
      const status = apiErr.statusCode;
      if (status === 503 && !reply.hasHeader("retry-after")) reply.header("Retry-After", RETRY_AFTER_SECONDS);
      if (status >= 500 && status !== 503) req.log.error({ err }, "OTLP request failed");
      else if (status === 503 && !(err instanceof ApiError))
        req.log.warn({ err: (err as Error).message }, "store unavailable");
      // an exporter retries 429, 502, 503 and 504 only; anything else unknown is a 500 it drops
      const code = GRPC_OF_STATUS[status] ?? (status >= 500 ? RpcCode.INTERNAL : RpcCode.INVALID_ARGUMENT);
      return send(reply, status, encodeStatus(code, apiErr.message, encoding), encoding);
    });

    const config = { errorStyle: "envelope" as const, auth: { ingestion: true } as const, ingest: true };
    /** One signal's endpoint: decode, check the key's role, ingest, answer in the request's encoding. */
    const endpoint = <R>(
      path: string,
      decode: (body: Buffer, encoding: OtlpEncoding) => R,
      ingest: (ctx: AppContext, actor: IngestionKeyActor, request: R) => Promise<ExportOutcome>,
      encode: (outcome: ExportOutcome, encoding: OtlpEncoding) => Buffer,
    ) =>
      scope.post(path, { bodyLimit: OTLP_BODY_LIMIT, config, compress: false }, async (req, reply) => {
        const encoding = encodingOf(req);
        // the decoded request is handed to the ingest, not held by this handler while it waits
        const outcome = await begin(req, encoding, decode, ingest);
        return send(reply, 200, encode(outcome, encoding), encoding);
      });
    /** Decodes the body, checks the key's role and starts the ingest. */
    const begin = <R>(
      req: FastifyRequest,
      encoding: OtlpEncoding,
      decode: (body: Buffer, encoding: OtlpEncoding) => R,
      ingest: (ctx: AppContext, actor: IngestionKeyActor, request: R) => Promise<ExportOutcome>,
    ): Promise<ExportOutcome> => {
      const request = decode(bodyOf(req), encoding);
      const actor = actorOf(req);
      if (actor.type !== "ingestion_key")
        throw new ApiError(403, "FORBIDDEN", "This endpoint only accepts a key with role usage-ingestion.");
      return ingest(ctx, actor, request);
    };
    endpoint("/v1/otlp/v1/metrics", decodeMetricsRequest, ingestOtlpMetrics, encodeMetricsResponse);
    endpoint("/v1/otlp/v1/traces", decodeTracesRequest, ingestOtlpTraces, encodeTracesResponse);
  });
}

/** The request's body as bytes (an absent body is an empty request, which OTLP answers with success). */
function bodyOf(req: FastifyRequest): Buffer {
  return Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
}
