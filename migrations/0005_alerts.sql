-- Alerts: channels per repository that hear about new regressions, commit-status targets,
-- and an outbox of messages to post, retried with back-off, with a log of every attempt.

CREATE TABLE alert_channels (
    id            INTEGER PRIMARY KEY,
    repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    kind          TEXT    NOT NULL CHECK (kind IN ('json', 'slack', 'discord')),
    url           TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    UNIQUE (repository_id, url)
);

-- One message per channel per regression: the UNIQUE key is what makes a second
-- notification of the same regression impossible.
CREATE TABLE alert_deliveries (
    id              INTEGER PRIMARY KEY,
    channel_id      INTEGER NOT NULL REFERENCES alert_channels(id) ON DELETE CASCADE,
    regression_id   INTEGER NOT NULL REFERENCES regressions(id) ON DELETE CASCADE,
    state           TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'failed', 'cancelled')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    UNIQUE (channel_id, regression_id)
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (state, next_attempt_at);

-- Where a repository's commit statuses go (GitHub, GitHub Enterprise, Gitea, Forgejo).
CREATE TABLE commit_status_targets (
    repository_id INTEGER PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
    kind          TEXT    NOT NULL CHECK (kind IN ('github', 'gitea')),
    api_url       TEXT    NOT NULL,
    -- owner/name on the forge
    slug          TEXT    NOT NULL,
    -- the forge's API token: needed in clear to post, never shown back in full
    token         TEXT    NOT NULL,
    updated_at    INTEGER NOT NULL
);

-- A commit state to post; a newer state for the same commit supersedes one not yet sent.
CREATE TABLE commit_status_posts (
    id              INTEGER PRIMARY KEY,
    commit_id       INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    commit_state    TEXT    NOT NULL CHECK (commit_state IN ('pending', 'success', 'failure', 'error')),
    description     TEXT    NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'failed', 'cancelled')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER
);
CREATE INDEX commit_status_posts_by_commit ON commit_status_posts (commit_id, id);
CREATE INDEX commit_status_posts_due ON commit_status_posts (state, next_attempt_at);

-- The delivery log: every attempt at either kind of outbox row.
CREATE TABLE alert_attempts (
    id             INTEGER PRIMARY KEY,
    delivery_id    INTEGER REFERENCES alert_deliveries(id) ON DELETE CASCADE,
    status_post_id INTEGER REFERENCES commit_status_posts(id) ON DELETE CASCADE,
    attempt        INTEGER NOT NULL,
    at             INTEGER NOT NULL,
    -- the HTTP status answered, NULL when no answer came
    http_status    INTEGER,
    -- what went wrong (transport error or the start of the answer), NULL on success
    error          TEXT,
    CHECK ((delivery_id IS NULL) <> (status_post_id IS NULL))
);
CREATE INDEX alert_attempts_by_delivery ON alert_attempts (delivery_id);
CREATE INDEX alert_attempts_by_status_post ON alert_attempts (status_post_id);
