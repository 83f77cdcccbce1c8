import { perApp } from "../core/context.js";

/**
 * A count of the changes this process made to budgets (set, changed, removed), so the process's
 * budget watch (watch.ts) reloads which connections count toward which budget before it counts
 * the next spend, rather than at its next periodic reload. Other processes reload on their own
 * schedule.
 */
export const budgetChanges = perApp(() => ({ count: 0 }));
