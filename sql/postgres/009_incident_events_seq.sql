-- Causal order of an incident's timeline (src/incidents/): events are read back by `seq`, not by
-- time, since two events of one change share a timestamp. Every change locks its incident row
-- before it appends events, so within one incident a later change always draws a higher `seq`.
-- Existing rows are numbered by time, and within one timestamp in the order one change writes
-- them (the state change, then the notifications it caused): heap order is not insert order
-- once deletes have freed space, so it is not used.
ALTER TABLE incident_events ADD COLUMN seq bigint;
UPDATE incident_events e SET seq = o.n
  FROM (SELECT id, row_number() OVER (
                 ORDER BY at,
                          CASE kind WHEN 'opened' THEN 0 WHEN 'acknowledged' THEN 1
                                    WHEN 'resolved' THEN 2 WHEN 'notified' THEN 3 ELSE 4 END,
                          id) AS n
          FROM incident_events) o
 WHERE e.id = o.id;
ALTER TABLE incident_events ALTER COLUMN seq SET NOT NULL;
ALTER TABLE incident_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY;
SELECT setval(pg_get_serial_sequence('incident_events', 'seq'), coalesce(max(seq), 0) + 1, false)
  FROM incident_events;
DROP INDEX incident_events_incident;
CREATE INDEX incident_events_incident ON incident_events (incident_id, seq);
