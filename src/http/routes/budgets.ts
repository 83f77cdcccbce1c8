import {
  getAccountBudget,
  getConnectionBudget,
  setAccountBudget,
  setConnectionBudget,
} from "../../budgets/budgets.js";
import { budgetBody, MAX_BUDGET_USD, validateBudgetBody } from "../../budgets/schema.js";
import { connectionParams } from "../../connections/schema.js";
import { accountBudget, connectionBudget } from "../responses/budgets.js";
import { defineRoute } from "../route.js";

/**
 * Monthly spend budgets (docs/api.md: Budgets). Under /v1/connections/{id}/ the errors are the
 * connection endpoints' `{error}`; the account's budget answers the envelope.
 */
const tag = "Budgets";
const put = `Body: {"monthly_budget_usd": <US dollars, at least 0.01, at most ${MAX_BUDGET_USD}, whole cents>}, or null to remove the budget.`;

export const budgetRoutes = [
  defineRoute({
    tag,
    errorStyle: "simple",
    method: "PUT",
    path: "/v1/connections/:id/budget",
    summary: "Set or remove a connection's monthly budget",
    description: `${put} Warnings at 50, 80 and 100% of it, each once per UTC month; 100% opens a budget incident.`,
    auth: "connections:write",
    params: connectionParams,
    body: budgetBody,
    // names the field and says to send US dollars as a number (not a string, not cents)
    parseBody: validateBudgetBody,
    status: 200,
    responses: { 200: connectionBudget },
    handler: ({ ctx, actor, params, body }) =>
      setConnectionBudget(ctx, actor, params.id, body.monthly_budget_usd),
  }),
  defineRoute({
    tag,
    errorStyle: "simple",
    method: "GET",
    path: "/v1/connections/:id/budget",
    summary: "A connection's monthly budget and this month's spend",
    auth: "usage:read",
    params: connectionParams,
    status: 200,
    responses: { 200: connectionBudget },
    handler: ({ ctx, actor, params }) => getConnectionBudget(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "PUT",
    path: "/v1/budget",
    summary: "Set or remove the account's monthly budget",
    description: `${put} The account is a personal key's user (its personal connections) or an organization key's organization (its connections); an organization's budget needs the admin or owner role.`,
    auth: "connections:write",
    body: budgetBody,
    parseBody: validateBudgetBody,
    status: 200,
    responses: { 200: accountBudget },
    handler: ({ ctx, actor, body }) => setAccountBudget(ctx, actor, body.monthly_budget_usd),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/budget",
    summary: "The account's monthly budget and this month's spend over its connections",
    auth: "usage:read",
    status: 200,
    responses: { 200: accountBudget },
    handler: ({ ctx, actor }) => getAccountBudget(ctx, actor),
  }),
];
