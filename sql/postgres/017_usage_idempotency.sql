-- Idempotency keys of POST /v1/usage (issue #16, point 5: a client that resends a batch whose
-- answer it never got must not store it twice).
--
-- A request with an `Idempotency-Key` header claims (api key, idempotency key) here before its
-- rows are written. The row fixes the batch's timestamp, so its entries get the same ids and the
-- same `ts` on every resend, and the series store's upsert key (ts, id) stores them once. The
-- body's SHA-256 tells a resend from a different request under a reused key (409). Rows are kept
-- 24 hours (the retention job removes older ones); the key itself is stored as its SHA-256 too.
CREATE TABLE usage_idempotency (
  api_key_id text NOT NULL,
  key_sha256 text NOT NULL,
  body_sha256 text NOT NULL,
  entries integer NOT NULL,
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (api_key_id, key_sha256)
);
CREATE INDEX usage_idempotency_recorded ON usage_idempotency (recorded_at);
