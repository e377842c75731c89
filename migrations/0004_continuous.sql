-- Continuous benchmarking: webhooks and polling that notice pushes, machine labels that a
-- repository selects, and bisections that pin a regression's culprit commit.

-- The shared secret of the repository's push webhook; NULL refuses every delivery for it.
ALTER TABLE repositories ADD COLUMN webhook_secret TEXT;
-- Seconds between polls of the remote, for hosts that cannot send webhooks; NULL = no polling.
ALTER TABLE repositories ADD COLUMN poll_seconds INTEGER;
ALTER TABLE repositories ADD COLUMN polled_at INTEGER;
-- Comma-separated machine labels: only machines carrying all of them run this repository's
-- jobs; '' = every machine.
ALTER TABLE repositories ADD COLUMN machine_labels TEXT NOT NULL DEFAULT '';

-- Comma-separated labels a worker declares (`kymo worker --label`).
ALTER TABLE machines ADD COLUMN labels TEXT NOT NULL DEFAULT '';

-- Why a job exists: 'head' (a push's new head), 'bisect', 'backfill' (the other commits of a
-- push, a poll), 'manual' (kymo run, retry). The priority follows from it.
ALTER TABLE jobs ADD COLUMN reason TEXT NOT NULL DEFAULT 'manual';

-- Every webhook delivery, accepted or not, with what came of it.
CREATE TABLE webhook_deliveries (
    id            INTEGER PRIMARY KEY,
    provider      TEXT    NOT NULL CHECK (provider IN ('github', 'gitlab', 'gitea')),
    -- the provider's delivery id (X-GitHub-Delivery ...); a delivery is processed once
    delivery      TEXT    NOT NULL,
    event         TEXT    NOT NULL,
    repository_id INTEGER REFERENCES repositories(id) ON DELETE SET NULL,
    outcome       TEXT    NOT NULL CHECK (outcome IN ('processed', 'ignored', 'rejected')),
    status        INTEGER NOT NULL,
    detail        TEXT    NOT NULL,
    received_at   INTEGER NOT NULL
);
-- Rejected deliveries (forged, unknown repository) do not claim their id: only accepted ones.
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries (provider, delivery)
    WHERE outcome <> 'rejected';
CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (received_at DESC);

-- A search for the commit that caused a regression, between a good and a bad commit of the
-- tracked branch, on the regression's machine.
CREATE TABLE bisections (
    id            INTEGER PRIMARY KEY,
    regression_id INTEGER NOT NULL UNIQUE REFERENCES regressions(id) ON DELETE CASCADE,
    -- the last commit known at the old level and the first known at the new one
    good_id       INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    bad_id        INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    state         TEXT    NOT NULL CHECK (state IN ('running', 'found', 'abandoned')),
    steps         INTEGER NOT NULL DEFAULT 0,
    -- the commit being measured now, and how many runs of it were asked for
    probe_id      INTEGER REFERENCES commits(id) ON DELETE SET NULL,
    probe_runs    INTEGER NOT NULL DEFAULT 0,
    note          TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX bisections_running ON bisections (state);
