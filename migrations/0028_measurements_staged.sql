-- Uploads land here first, in arrival order: the key leads with the commit, so an upload (one
-- run of one commit) fills one contiguous range of the table and changes a few pages, where
-- the clustered `measurements` changes a page per series it measured. `Db::merge_staged` moves
-- the rows into `measurements` every few hundred thousand, each series' page then written once
-- per merge instead of once per upload. Readers read both tables; a row is in exactly one.
--
-- No foreign keys: checking three parents a row was about a third of an upload's cost, and
-- ingest makes every reference true by construction in the upload's own transaction (the run
-- just inserted, its commit, series found by a join). Deleting a parent deletes the staged rows
-- through the triggers below, as `ON DELETE CASCADE` does for `measurements`.
CREATE TABLE measurements_staged (
    commit_id INTEGER NOT NULL,
    series_id INTEGER NOT NULL,
    run_id    INTEGER NOT NULL,
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

CREATE TRIGGER measurements_staged_of_series AFTER DELETE ON series
BEGIN
    DELETE FROM measurements_staged WHERE series_id = OLD.id;
END;

CREATE TRIGGER measurements_staged_of_commit AFTER DELETE ON commits
BEGIN
    DELETE FROM measurements_staged WHERE commit_id = OLD.id;
END;

CREATE TRIGGER measurements_staged_of_run AFTER DELETE ON runs
BEGIN
    DELETE FROM measurements_staged WHERE run_id = OLD.id;
END;
