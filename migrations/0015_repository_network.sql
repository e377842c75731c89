-- A repository whose suites never get the network, whatever a commit's kymo.toml says: a
-- committer cannot turn it back on. Off by default (suites decide, and builds fetch).
ALTER TABLE repositories ADD COLUMN network_off INTEGER NOT NULL DEFAULT 0 CHECK (network_off IN (0, 1));
