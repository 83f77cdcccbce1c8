import fc from "fast-check";
import t from "tap";
import { heartbeatBody, parseHeartbeat } from "../../src/ingest/heartbeat-schema.js";

/*
 * The hand-written heartbeat check (the fast path of POST /v1/gateway/ingest) must accept exactly
 * what the schema accepts, with the same output: on generated bodies, valid and broken in every
 * field, `parseHeartbeat` and the schema agree.
 */

const REFUSED = Symbol("refused");
const viaSchema = (raw: unknown) => {
  const r = heartbeatBody.safeParse(raw);
  if (!r.success) throw REFUSED;
  return r.data;
};
/** Key order does not matter (nothing reads it), except in `system`, which is stored as JSON text. */
const sorted = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(sorted)
    : v && typeof v === "object"
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
        )
      : v;
const outcome = (f: () => unknown) => {
  try {
    const out = f() as { system?: unknown };
    return `${JSON.stringify(sorted(out))} system ${JSON.stringify(out.system)}`;
  } catch (e) {
    if (e === REFUSED) return "refused";
    throw e;
  }
};

const odd = fc.oneof(
  fc.constant(null),
  fc.constant(-1),
  fc.constant(1.5),
  fc.constant(1e13),
  fc.constant(""),
  fc.constant("x".repeat(300)),
  fc.constant([]),
  fc.constant({}),
  fc.constant(true),
  fc.constant("2026-02-30T00:00:00Z"),
  fc.constant("2026-11-20T10:00:00"),
  fc.constant("1999-01-01T00:00:00Z"),
);
const time = fc
  .date({ min: new Date("2026-01-01T00:00:00Z"), max: new Date("2027-01-01T00:00:00Z"), noInvalidDate: true })
  .map((d) => d.toISOString());
const count = fc.integer({ min: 0, max: 1e12 });
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
const body = fc.record(
  {
    type: fc.constant("heartbeat"),
    gateway: fc.record({
      status: fc.constantFrom("healthy", "degraded", ""),
      latencyMs: fc.double({ min: 0, max: 4e6, noNaN: true }),
      version: fc.string({ maxLength: 70 }),
    }),
    system: maybe(
      fc.record({ loadAvg: fc.array(fc.double({ noNaN: true })), gatewayPidAlive: maybe(fc.boolean()) }),
    ),
    tokens: maybe(
      fc.record(
        {
          period: maybe(
            fc.record(
              {
                inputTokens: count,
                outputTokens: count,
                cacheReadTokens: maybe(count),
                requestCount: maybe(count),
                estimatedCostUsd: maybe(fc.double({ min: 0, max: 2e8, noNaN: true })),
                startedAt: time,
                endedAt: time,
              },
              { requiredKeys: ["inputTokens", "outputTokens", "startedAt", "endedAt"] },
            ),
          ),
          byModel: maybe(
            fc.array(
              fc.record({ model: fc.string({ maxLength: 210 }), inputTokens: count, outputTokens: count }),
              { maxLength: 4 },
            ),
          ),
        },
        { requiredKeys: [] },
      ),
    ),
  },
  { requiredKeys: ["type", "gateway"] },
);

/** One field somewhere in the body replaced by an odd value (or the body left as it is). */
const mutated = fc.tuple(body, fc.nat(), odd, fc.boolean()).map(([b, pick, value, mutate]) => {
  const plain = JSON.parse(JSON.stringify(b)) as Record<string, unknown>;
  if (!mutate) return plain;
  const paths: [Record<string, unknown>, string][] = [];
  const walk = (o: unknown) => {
    if (typeof o !== "object" || o === null) return;
    for (const k of Object.keys(o)) {
      paths.push([o as Record<string, unknown>, k]);
      walk((o as Record<string, unknown>)[k]);
    }
  };
  walk(plain);
  const [o, k] = paths[pick % paths.length] as [Record<string, unknown>, string];
  o[k] = value;
  return plain;
});

t.test("the fast heartbeat check agrees with the schema", async (t) => {
  let accepted = 0;
  let refused = 0;
  fc.assert(
    fc.property(mutated, (raw) => {
      const expected = outcome(() => viaSchema(structuredClone(raw)));
      const fast = outcome(() => parseHeartbeat(structuredClone(raw), viaSchema));
      if (expected === "refused") refused++;
      else accepted++;
      return fast === expected;
    }),
    { numRuns: 3000, seed: 17 },
  );
  t.ok(accepted > 500 && refused > 500, `both kinds generated (${accepted} valid, ${refused} invalid)`);
});
