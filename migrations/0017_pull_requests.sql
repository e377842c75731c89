-- Pull and merge requests of a tracked repository, as its forge's webhooks announce them,
-- and the feedback kymo keeps on each: one comment (edited in place) and a commit status on
-- the head.
CREATE TABLE pull_requests (
    id            INTEGER PRIMARY KEY,
    repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    provider      TEXT    NOT NULL CHECK (provider IN ('github', 'gitlab', 'gitea')),
    -- the forge's number (GitHub, Gitea) or iid (GitLab) of the request
    number        INTEGER NOT NULL,
    title         TEXT    NOT NULL,
    author        TEXT    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('open', 'closed')),
    head_sha      TEXT    NOT NULL,
    -- the forge's id of kymo's comment, once created: later results edit it
    comment_id    TEXT,
    -- feedback (status and comment) waits to be published from this time; NULL = published
    feedback_due_at   INTEGER,
    feedback_attempts INTEGER NOT NULL DEFAULT 0,
    feedback_error    TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (repository_id, provider, number)
);
CREATE INDEX pull_requests_feedback_due ON pull_requests (feedback_due_at)
    WHERE feedback_due_at IS NOT NULL;

-- The pull request a comparison measured (NULL for a try run).
ALTER TABLE comparisons ADD COLUMN pull_request_id INTEGER REFERENCES pull_requests(id) ON DELETE SET NULL;
CREATE INDEX comparisons_by_pull_request ON comparisons (pull_request_id) WHERE pull_request_id IS NOT NULL;

-- A pull request whose head lives in another repository (a fork) runs its author's code on
-- the benchmark machines: only the authors named here (comma-separated forge logins) may.
ALTER TABLE repositories ADD COLUMN fork_authors TEXT NOT NULL DEFAULT '';
-- 'always': every pull request gets a comment; 'changes': only one where something changed
-- (an existing comment is still kept up to date).
ALTER TABLE repositories ADD COLUMN pull_comments TEXT NOT NULL DEFAULT 'always'
    CHECK (pull_comments IN ('always', 'changes'));
