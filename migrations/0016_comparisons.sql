-- Comparison runs (try runs and pull/merge requests): a head measured against its merge base
-- with the tracked branch, interleaved on one machine. Their results are kept here, apart
-- from runs and measurements, so that commits that never landed stay out of every series,
-- trend, change point and regression of the tracked branch.
CREATE TABLE comparisons (
    id            INTEGER PRIMARY KEY,
    repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    -- 'try' (kymo try) or 'pull' (a forge's pull or merge request)
    origin        TEXT    NOT NULL CHECK (origin IN ('try', 'pull')),
    -- what was asked for: the ref of a try run, the title of a pull request
    label         TEXT    NOT NULL,
    base_id       INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    head_id       INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    -- how the base was chosen: 'merge-base of BRANCH', or the --base the user gave
    baseline      TEXT    NOT NULL,
    rounds        INTEGER NOT NULL CHECK (rounds BETWEEN 1 AND 20),
    -- where the head is fetched from when no branch holds it (a pull request from a fork):
    -- refs/pull/N/head or refs/merge-requests/N/head
    head_ref      TEXT,
    -- JSON: one {"base": [SuiteUpload], "head": [SuiteUpload]} per round, once measured
    results       TEXT,
    machine_id    INTEGER REFERENCES machines(id),
    log           TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    finished_at   INTEGER
);
CREATE INDEX comparisons_by_repository ON comparisons (repository_id, id DESC);

-- The job that measures a comparison; NULL for a job that measures one commit of history.
ALTER TABLE jobs ADD COLUMN comparison_id INTEGER REFERENCES comparisons(id) ON DELETE CASCADE;
CREATE INDEX jobs_by_comparison ON jobs (comparison_id) WHERE comparison_id IS NOT NULL;

-- A comparison job may wait for a commit that also waits to be measured for history: only
-- history jobs are unique per (commit, machine).
DROP INDEX jobs_one_active_per_machine;
CREATE UNIQUE INDEX jobs_one_active_per_machine ON jobs (commit_id, machine_id)
    WHERE state IN ('queued', 'running') AND comparison_id IS NULL;
