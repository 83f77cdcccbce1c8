-- Issue #32: the probe scheduler rewrites a connection's row two or three times per check (the
-- claim's lease, the recorded result). A lease write changes no indexed column, so PostgreSQL can
-- make it a heap-only update (no new entry in any of the table's seven indexes) when the row's
-- page has room for the new version; at the default fillfactor of 100 pages are full and every
-- update went to another page with all its index entries. 70 leaves that room. Pages written
-- from now on keep it (existing ones as their rows move).
ALTER TABLE connections SET (fillfactor = 70);
