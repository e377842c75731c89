-- Change points found in a series' history, with the evidence behind them and their triage.
-- One row per change point per series: re-analysis updates the evidence of the row whose
-- commit is nearest, instead of adding another.

CREATE TABLE regressions (
    id            INTEGER PRIMARY KEY,
    series_id     INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    -- the first commit of the new level (the culprit, or the end of the suspect range)
    commit_id     INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    -- the last commit of the old level: the suspect range is (previous, commit]
    previous_id   INTEGER REFERENCES commits(id) ON DELETE SET NULL,
    kind          TEXT    NOT NULL CHECK (kind IN ('regression', 'improvement')),
    baseline      REAL    NOT NULL,
    value         REAL    NOT NULL,
    change_pct    REAL    NOT NULL,
    ci_low_pct    REAL    NOT NULL,
    ci_high_pct   REAL    NOT NULL,
    p_value       REAL    NOT NULL,
    noise_pct     REAL    NOT NULL,
    segment_before INTEGER NOT NULL,
    segment_after  INTEGER NOT NULL,
    method        TEXT    NOT NULL,
    -- whether the latest analysis still finds this change point
    active        INTEGER NOT NULL DEFAULT 1,
    state         TEXT    NOT NULL DEFAULT 'open'
                  CHECK (state IN ('open', 'acknowledged', 'fixed', 'false_positive')),
    state_by      TEXT,
    state_at      INTEGER,
    note          TEXT    NOT NULL DEFAULT '',
    detected_at   INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (series_id, commit_id)
);
CREATE INDEX regressions_by_state ON regressions (state, kind);
