-- Uploads land here first, in arrival order: the key leads with the commit, so an upload (one
-- run of one commit) fills one contiguous range of the table and changes a few pages, where
-- the clustered `measurements` changes a page per series it measured. `Db::merge_staged` moves
-- the rows into `measurements` every few hundred thousand, each series' page then written once
-- per merge instead of once per upload. Readers read both tables; a row is in exactly one.
CREATE TABLE measurements_staged (
    commit_id INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    value     REAL    NOT NULL,
    -- the samples' binary encoding (kymo_core::samples)
    samples   BLOB    NOT NULL,
    -- base64 HdrHistogram V2, when measured
    hdr       TEXT,
    PRIMARY KEY (commit_id, series_id, run_id)
) WITHOUT ROWID;

-- The commits that have staged rows, found by one key seek each (a loose index scan): what a
-- reader of one series' history walks to seek (commit, series) in the staged table, instead of
-- scanning it.
CREATE VIEW staged_commits (commit_id) AS
WITH RECURSIVE k (commit_id) AS (
    SELECT min(commit_id) FROM measurements_staged
    UNION ALL
    SELECT (SELECT min(y.commit_id) FROM measurements_staged y WHERE y.commit_id > k.commit_id)
    FROM k WHERE k.commit_id IS NOT NULL
)
SELECT commit_id FROM k WHERE commit_id IS NOT NULL;
