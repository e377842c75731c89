-- Measurements are stored clustered on the key every reader uses, (series, commit, run), in a
-- WITHOUT ROWID table: a series' history is one contiguous range of the table itself, and the
-- rowid and both indexes go (the (series_id, commit_id) index and UNIQUE (run_id, series_id),
-- which the key implies, since a run belongs to one commit). Nothing referenced
-- measurements.id; a commit's latest measurement of a series is now the one of its highest run.
-- Each migration runs in one transaction: a row that cannot be copied (one whose series, commit
-- or run is gone) fails it, and the database stays as it was.
CREATE TABLE measurements_clustered (
    series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    commit_id INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    value     REAL    NOT NULL,
    -- the samples' binary encoding (kymo_core::samples); JSON text in a row that the
    -- conversion of migration 0022 has not reached yet
    samples   BLOB    NOT NULL,
    -- base64 HdrHistogram V2, when measured
    hdr       TEXT,
    PRIMARY KEY (series_id, commit_id, run_id)
) WITHOUT ROWID;

INSERT INTO measurements_clustered (series_id, commit_id, run_id, value, samples, hdr)
SELECT series_id, commit_id, run_id, value, samples, hdr FROM measurements
ORDER BY series_id, commit_id, run_id;

DROP TABLE measurements;
ALTER TABLE measurements_clustered RENAME TO measurements;

-- A conversion of samples left unfinished went by measurement id; it starts again by series
-- (rows already converted are skipped).
UPDATE samples_conversion SET next_id = 0;
