-- Per-repository (benchmark = '') and per-benchmark (benchmark = a name prefix) overrides of
-- the verdicts' sensitivity, as a JSON object of kymo_core::stats::SensitivityOverrides.
CREATE TABLE sensitivity (
    id            INTEGER PRIMARY KEY,
    repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    benchmark     TEXT    NOT NULL DEFAULT '',
    overrides     TEXT    NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (repository_id, benchmark)
);
