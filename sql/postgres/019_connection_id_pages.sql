-- Big accounts (#17): reads over many connections walk the visible connections in pages by id,
-- in byte order (COLLATE "C", the order Vigil compares ids in). These indexes serve those pages
-- for an organization's connections and a user's personal ones.
CREATE INDEX IF NOT EXISTS connections_org_id_c ON connections (organization_id, id COLLATE "C");
CREATE INDEX IF NOT EXISTS connections_user_id_c ON connections (user_id, id COLLATE "C") WHERE organization_id IS NULL;
