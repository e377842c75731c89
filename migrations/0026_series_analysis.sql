-- What the last change-point analysis of a series decided, and a digest of the input it read,
-- so that the next analysis re-examines only the analysis windows a new point can change
-- (kymo_core::stats::Windows) once it has proved the earlier input unchanged.
CREATE TABLE series_analysis (
    series_id   INTEGER PRIMARY KEY REFERENCES series(id) ON DELETE CASCADE,
    -- JSON written by kymo_core::db::analysis_state: settings, input digest, decisions
    state       TEXT    NOT NULL,
    -- analyses that re-examined only the open windows, and analyses of the whole history
    incremental INTEGER NOT NULL DEFAULT 0,
    full        INTEGER NOT NULL DEFAULT 0,
    -- why the last whole-history analysis could not be incremental
    full_reason TEXT
);
