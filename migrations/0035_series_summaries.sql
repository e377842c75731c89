-- Summaries of each series by buckets of history at seven zoom levels (kymo_core::series_summary):
-- per bucket of 16 × 4^level commits, how many were measured, the lowest, highest, first and last
-- point, and the environments of the runs at its ends and where one first changed inside it. A
-- chart of a long window reads a few hundred of these instead of every point. They cover the
-- merged measurements: the staged-table merge and `record_history` keep them current, readers add
-- the staged rows themselves. Clustered on the key every reader uses, like `measurements`; no
-- foreign keys (the merge writes them with the checks off), a trigger deletes a series' rows.
CREATE TABLE series_summaries (
    series_id         INTEGER NOT NULL,
    level             INTEGER NOT NULL,
    bucket            INTEGER NOT NULL,
    points            INTEGER NOT NULL,
    low_position      INTEGER NOT NULL,
    low_value         REAL    NOT NULL,
    high_position     INTEGER NOT NULL,
    high_value        REAL    NOT NULL,
    first_position    INTEGER NOT NULL,
    first_value       REAL    NOT NULL,
    last_position     INTEGER NOT NULL,
    last_value        REAL    NOT NULL,
    first_environment INTEGER NOT NULL,
    last_environment  INTEGER NOT NULL,
    change_position   INTEGER,
    change_from       INTEGER,
    change_to         INTEGER,
    PRIMARY KEY (series_id, level, bucket)
) WITHOUT ROWID;

-- The environments runs ran in (kernel and toolchain), numbered once: what a summary names.
CREATE TABLE run_environments (
    id        INTEGER PRIMARY KEY,
    kernel    TEXT NOT NULL,
    toolchain TEXT NOT NULL,
    UNIQUE (kernel, toolchain)
);

-- Series whose summaries are still to be built from their measurements: every series of a
-- database from before this migration. `Db::open` builds them before it answers anything.
CREATE TABLE series_summaries_pending (series_id INTEGER PRIMARY KEY);
INSERT INTO series_summaries_pending (series_id) SELECT id FROM series;

CREATE TRIGGER series_summaries_of_series AFTER DELETE ON series
BEGIN
    DELETE FROM series_summaries WHERE series_id = OLD.id;
    DELETE FROM series_summaries_pending WHERE series_id = OLD.id;
END;
