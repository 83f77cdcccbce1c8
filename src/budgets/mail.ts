import type { MailText } from "../incidents/incidents.js";
import type { WarningLevel } from "./repository.js";

/** What a budget e-mail says: whose budget, the month's figures, and where to look. */
export interface BudgetFacts {
  /** `org B gateway`, `organization Org B`, `account bob@b.example`. */
  label: string;
  month: string;
  budgetUsd: number;
  spentUsd: number;
  percentUsed: number;
  projectedUsd: number;
  /** Link to the budget (…/v1/connections/{id}/budget or …/v1/budget). */
  link: string;
}

const usd = (v: number) => `$${v.toFixed(2)}`;

const figures = (f: BudgetFacts) =>
  `Spent in ${f.month} (UTC): ${usd(f.spentUsd)} of ${usd(f.budgetUsd)} (${f.percentUsed}%).\n` +
  `At this month's rate: about ${usd(f.projectedUsd)} by the end of the month.\n\n${f.link}\n`;

/** A warning: 50 or 80 percent of the budget spent, or a projected overrun. */
export function warningMail(level: Exclude<WarningLevel, "100">, f: BudgetFacts): MailText {
  if (level === "projected")
    return {
      kind: "budget_warning",
      subject: `[Vigil] ${f.label} is on course to exceed its monthly budget`,
      body: `${f.label} is spending faster than its monthly budget allows: at this rate it will spend about ${usd(f.projectedUsd)} in ${f.month}, over its budget of ${usd(f.budgetUsd)}.\n${figures(f)}`,
    };
  return {
    kind: "budget_warning",
    subject: `[Vigil] ${f.label} has used ${level}% of its monthly budget`,
    body: `${f.label} has used ${level}% of its monthly budget.\n${figures(f)}`,
  };
}

/** 100 percent: the e-mail that opens the `budget` incident (or, when one is open already, a warning). */
export function overBudgetMail(f: BudgetFacts): MailText {
  return {
    kind: "budget_warning",
    subject: `[Vigil] ${f.label} is over its monthly budget`,
    body: `${f.label} has reached its monthly budget: a budget incident is open until the month ends or the budget is raised above the spend.\n${figures(f)}`,
  };
}

export type ResolvedBecause = "new_month" | "within_budget" | "budget_removed";

/** The e-mail that resolves a `budget` incident. */
export function resolvedMail(label: string, because: ResolvedBecause, link: string): MailText {
  const why = {
    new_month: "a new budget month has begun",
    within_budget: "the budget is above the month's spend again",
    budget_removed: "the budget was removed",
  }[because];
  return {
    kind: "recovery",
    subject: `[Vigil] ${label} is no longer over budget`,
    body: `The budget incident of ${label} is resolved: ${why}.\n\n${link}\n`,
  };
}
