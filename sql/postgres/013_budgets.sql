-- Monthly spend budgets (src/budgets/): one per connection, per user (the user's personal
-- connections) or per organization (its connections), in whole US cents. Months are UTC calendar
-- months written 'YYYY-MM'.
CREATE TABLE budgets (
  scope text NOT NULL CHECK (scope IN ('connection', 'user', 'organization')),
  -- The connection's, user's or organization's id: the one of the three columns below that is set.
  target_id text NOT NULL,
  connection_id text REFERENCES connections (id) ON DELETE CASCADE,
  user_id text REFERENCES users (id) ON DELETE CASCADE,
  organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  -- At most 10,000,000 USD (src/budgets/schema.ts).
  monthly_budget_cents integer NOT NULL CHECK (monthly_budget_cents > 0 AND monthly_budget_cents <= 1000000000),
  -- Who set it last: an API key's or a user's id.
  set_by text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- Last evaluation by the budget job; NULL: due at its next run (set, changed).
  checked_at timestamptz,
  -- The month in which spend reached the budget, while it is over; NULL otherwise.
  over_month text CHECK (over_month ~ '^[0-9]{4}-[0-9]{2}$'),
  -- The connection whose `budget` incident stands for this budget while it is over: the
  -- connection itself, or for an account the one that had spent most when the budget was reached.
  holder_connection_id text REFERENCES connections (id) ON DELETE SET NULL,
  PRIMARY KEY (scope, target_id),
  CHECK (
    (scope = 'connection' AND connection_id = target_id AND user_id IS NULL AND organization_id IS NULL)
    OR (scope = 'user' AND user_id = target_id AND connection_id IS NULL AND organization_id IS NULL)
    OR (scope = 'organization' AND organization_id = target_id AND connection_id IS NULL AND user_id IS NULL)
  )
);
CREATE INDEX budgets_due ON budgets (checked_at NULLS FIRST);
CREATE INDEX budgets_holder ON budgets (holder_connection_id) WHERE holder_connection_id IS NOT NULL;

-- Which warnings were sent, so each goes out once per budget and month (also when the budget is
-- removed and set again). Not tied to the budget row; rows older than 13 months are deleted.
CREATE TABLE budget_warnings (
  scope text NOT NULL CHECK (scope IN ('connection', 'user', 'organization')),
  target_id text NOT NULL,
  month text NOT NULL CHECK (month ~ '^[0-9]{4}-[0-9]{2}$'),
  -- 50, 80, 100 (percent of the budget spent) or projected (the run rate crosses it before month end).
  level text NOT NULL CHECK (level IN ('50', '80', '100', 'projected')),
  -- The connection the alert was filed under (the account's top spender for an account budget).
  connection_id text REFERENCES connections (id) ON DELETE SET NULL,
  budget_cents integer NOT NULL,
  spent_cents double precision NOT NULL,
  sent_at timestamptz NOT NULL,
  PRIMARY KEY (scope, target_id, month, level)
);
