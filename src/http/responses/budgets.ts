import { z } from "zod";
import { oneOf } from "./common.js";

/** The month's figures of a budget, shared by the connection and account answers. */
const figures = {
  monthly_budget_usd: z.number().nullable().describe("the monthly budget in US dollars; null: none is set"),
  month: z.string().describe("the UTC calendar month the figures are for, YYYY-MM"),
  spent_usd: z
    .number()
    .describe(
      "US dollars spent this month so far: usage entries' cents and heartbeat dollars, as PUT /v1/usage",
    ),
  percent_used: z
    .number()
    .nullable()
    .describe("spent_usd as a percentage of the budget; null without a budget"),
  projected_usd: z
    .number()
    .describe("run-rate projection to the month's end: spent_usd × month length ÷ time elapsed"),
};

export const connectionBudget = z.object({ connection_id: z.string(), ...figures });

export const accountBudget = z.object({
  account_type: oneOf(["user", "organization"]).describe(
    "user: a personal key's user (its personal connections); organization: an organization key's",
  ),
  account_id: z.string(),
  connection_count: z.number().int().describe("connections whose spend counts"),
  ...figures,
});
