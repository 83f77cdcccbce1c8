-- OTLP ingest (issue #35): every export rewrites its instance's row in otlp_series. With the
-- default fill factor a page holds as many rows as fit (two of an instance of 60 series), so an
-- update finds no room for the new version on its page: it goes to another page, with a new
-- primary key entry, and the table and its index grow by a row per export until vacuum comes
-- (measured: 100 instances, 8 s of updates, 180 MB). Pages half filled by inserts keep room for
-- each row's next version beside it: the update stays on its page (a HOT update: no index entry,
-- the dead version pruned in place), for states of up to about 4 KB (about 90 series in state format 3).
ALTER TABLE otlp_series SET (fillfactor = 50);
