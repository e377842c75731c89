-- Day one on an existing repository.
-- A kymo.toml kept on the server, run by commits that carry none of their own.
ALTER TABLE repositories ADD COLUMN suites_toml TEXT;
-- Which configuration a worker's run used: 'commit' (its own kymo.toml) or 'server' (the
-- stored one), and the SHA-256 of that file (hex). NULL for uploads and older runs.
ALTER TABLE runs ADD COLUMN config_source TEXT CHECK (config_source IN ('commit', 'server'));
ALTER TABLE runs ADD COLUMN config_hash TEXT;
-- What a running job is doing, as its worker last said (fetching, building, running suite N of M).
ALTER TABLE jobs ADD COLUMN phase TEXT;
