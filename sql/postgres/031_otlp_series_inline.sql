-- OTLP ingest (issue #35): an instance's cumulative state is rewritten on every export. Its
-- second format (src/otlp/cumulative.ts) takes about 60 bytes a series, so an instance of up to
-- about 130 series fits in one page. Kept in the row (not compressed, not moved to the TOAST
-- table, which PostgreSQL does from 2 KB by default) each export's update writes the row once,
-- instead of a new TOAST value of several chunks with their index entries, and leaves one dead
-- row to vacuum instead of several.
ALTER TABLE otlp_series SET (toast_tuple_target = 8160);
ALTER TABLE otlp_series ALTER COLUMN state SET STORAGE MAIN;
