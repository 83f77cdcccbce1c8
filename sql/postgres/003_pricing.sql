-- Model prices in US dollars per million tokens, by effective date: a price change is a new
-- row with a later effective_from, so usage already recorded keeps the price of its day.
-- Vigil uses these when a heartbeat's byModel entry has no estimatedCostUsd.
-- To update: INSERT a row (see README, "Pricing"); running servers reload within 5 minutes.

CREATE TABLE model_prices (
  model text NOT NULL,
  effective_from date NOT NULL,
  input_per_mtok numeric NOT NULL CHECK (input_per_mtok >= 0),
  output_per_mtok numeric NOT NULL CHECK (output_per_mtok >= 0),
  cache_read_per_mtok numeric NOT NULL DEFAULT 0 CHECK (cache_read_per_mtok >= 0),
  cache_write_per_mtok numeric NOT NULL DEFAULT 0 CHECK (cache_write_per_mtok >= 0),
  PRIMARY KEY (model, effective_from)
);

-- Public list prices (standard tier) of common models, as published by their vendors in 2025.
INSERT INTO model_prices (model, effective_from, input_per_mtok, output_per_mtok, cache_read_per_mtok, cache_write_per_mtok) VALUES
  ('claude-opus-4-1',   '2025-01-01', 15,    75,   1.50,  18.75),
  ('claude-opus-4',     '2025-01-01', 15,    75,   1.50,  18.75),
  ('claude-opus-4-5',   '2025-01-01', 5,     25,   0.50,  6.25),
  ('claude-sonnet-4-5', '2025-01-01', 3,     15,   0.30,  3.75),
  ('claude-sonnet-4',   '2025-01-01', 3,     15,   0.30,  3.75),
  ('claude-3-7-sonnet', '2025-01-01', 3,     15,   0.30,  3.75),
  ('claude-3-5-sonnet', '2025-01-01', 3,     15,   0.30,  3.75),
  ('claude-haiku-4-5',  '2025-01-01', 1,     5,    0.10,  1.25),
  ('claude-3-5-haiku',  '2025-01-01', 0.80,  4,    0.08,  1.00),
  ('gpt-5',             '2025-01-01', 1.25,  10,   0.125, 0),
  ('gpt-5-mini',        '2025-01-01', 0.25,  2,    0.025, 0),
  ('gpt-5-nano',        '2025-01-01', 0.05,  0.40, 0.005, 0),
  ('gpt-4.1',           '2025-01-01', 2,     8,    0.50,  0),
  ('gpt-4.1-mini',      '2025-01-01', 0.40,  1.60, 0.10,  0),
  ('gpt-4.1-nano',      '2025-01-01', 0.10,  0.40, 0.025, 0),
  ('gpt-4o',            '2025-01-01', 2.50,  10,   1.25,  0),
  ('gpt-4o-mini',       '2025-01-01', 0.15,  0.60, 0.075, 0),
  ('o3',                '2025-01-01', 2,     8,    0.50,  0),
  ('o4-mini',           '2025-01-01', 1.10,  4.40, 0.275, 0),
  ('gemini-2.5-pro',    '2025-01-01', 1.25,  10,   0.31,  0),
  ('gemini-2.5-flash',  '2025-01-01', 0.30,  2.50, 0.075, 0),
  ('gemini-2.0-flash',  '2025-01-01', 0.10,  0.40, 0.025, 0);
