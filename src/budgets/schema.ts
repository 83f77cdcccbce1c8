import { z } from "zod";
import { invalidInput } from "../core/errors.js";

/** The smallest monthly budget accepted, in US dollars: one cent (budgets are kept in whole cents). */
export const MIN_BUDGET_USD = 0.01;

/** The largest monthly budget accepted, in US dollars; more is almost surely a unit mistake (cents). */
export const MAX_BUDGET_USD = 10_000_000;

const FIELD = "monthly_budget_usd";
const SEND_USD = `send US dollars as a number in ${FIELD}, e.g. {"${FIELD}": 250}, or null to remove the budget`;

/** The body of PUT …/budget, as the OpenAPI document describes it; `validateBudgetBody` parses it. */
export const budgetBody = z.strictObject({
  monthly_budget_usd: z
    .number()
    .min(MIN_BUDGET_USD)
    .max(MAX_BUDGET_USD)
    .nullable()
    .describe(
      `monthly budget in US dollars (whole cents, at least ${MIN_BUDGET_USD}, at most ${MAX_BUDGET_USD}); null removes it`,
    ),
});

export type BudgetBody = z.output<typeof budgetBody>;

/**
 * Parses the body of PUT …/budget: US dollars in whole cents, or null to remove the budget. Every problem
 * is a 400 naming the field and saying what to send: a string (`"250 USD"`), a field in cents
 * (`monthly_budget_cents`), a negative, zero, non-finite or absurd amount, an unknown field.
 */
export function validateBudgetBody(raw: unknown): BudgetBody {
  if (raw === null || raw === undefined || typeof raw !== "object" || Array.isArray(raw))
    throw invalidInput("body", `must be a JSON object: ${SEND_USD}`);
  const body = raw as Record<string, unknown>;
  const unknown = Object.keys(body).filter((k) => k !== FIELD);
  const inCents = unknown.find((k) => /cent/i.test(k));
  if (inCents !== undefined)
    throw invalidInput(`body.${inCents}`, `budgets are set in US dollars, not cents: ${SEND_USD}`);
  if (unknown[0] !== undefined) throw invalidInput(`body.${unknown[0]}`, `is not a known field: ${SEND_USD}`);
  if (!(FIELD in body)) throw invalidInput(`body.${FIELD}`, `is required: ${SEND_USD}`);
  const v = body[FIELD];
  const field = `body.${FIELD}`;
  if (v === null) return { monthly_budget_usd: null };
  if (typeof v === "string")
    throw invalidInput(
      field,
      `must be a number, not a string (${JSON.stringify(v).slice(0, 40)}): ${SEND_USD}`,
    );
  if (typeof v !== "number") throw invalidInput(field, `must be a number: ${SEND_USD}`);
  if (!Number.isFinite(v)) throw invalidInput(field, `must be a finite number of US dollars: ${SEND_USD}`);
  if (v < 0) throw invalidInput(field, "must not be negative: send a positive number of US dollars, or null");
  if (v === 0)
    throw invalidInput(field, "must be more than 0; send null to remove the budget instead of a zero budget");
  if (v > MAX_BUDGET_USD)
    throw invalidInput(
      field,
      `must be at most ${MAX_BUDGET_USD} (US dollars); an amount in cents must be divided by 100`,
      { field, max: MAX_BUDGET_USD },
    );
  // an amount that rounds to 0 cents (1e-200) passes the check of decimals below: refuse it first
  if (v < MIN_BUDGET_USD)
    throw invalidInput(
      field,
      `must be at least ${MIN_BUDGET_USD} (one cent); send null to remove the budget`,
    );
  if (Math.abs(v * 100 - toCents(v)) > 1e-6)
    throw invalidInput(field, "must be whole cents (at most 2 decimal places) of US dollars");
  return { monthly_budget_usd: v };
}

/** A validated amount in US dollars as whole cents (how budgets are stored). */
export const toCents = (usd: number) => Math.round(usd * 100);
