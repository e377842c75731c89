-- Each series' noise models as the last analysis measured them (kymo_core::stats::NoiseWindow),
-- so that a compare reads one small row per series instead of its last hundred points.
-- Two windows per series: the points before its last point (through_last = 0; a head that is
-- the series' newest commit) and the points up to it (through_last = 1; a head off the
-- branch or newer). A window is the points below before_position (every point when NULL),
-- the newest of them at newest_position (NULL when empty). Both hold while last_commit_id,
-- the series' last point, keeps its position: a force-push that moves it voids them.
-- A rowid table (not WITHOUT ROWID): SQLite's update hook, which moves the data version that
-- cached pages are checked against, does not see changes to WITHOUT ROWID tables.
CREATE TABLE series_noise (
    series_id          INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    through_last       INTEGER NOT NULL CHECK (through_last IN (0, 1)),
    last_commit_id     INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    last_position      INTEGER NOT NULL,
    newest_position    INTEGER,
    before_position    INTEGER,
    level              REAL    NOT NULL,
    between_commit_sd  REAL    NOT NULL,
    between_commit_pct REAL    NOT NULL,
    within_run_cv_pct  REAL,
    changes            INTEGER NOT NULL,
    samples_per_commit INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    PRIMARY KEY (series_id, through_last)
);
