-- Disturbed runs: runs in which most benchmarks moved together, the same way, against the
-- commit measured before (other work on the machine, not the code). A change found at a
-- commit whose only run on a machine is disturbed is not filed until another run of that
-- commit agrees: a worker's machine measures it again at once (a job of reason 'confirm'); an
-- upload's finding waits, unannounced, for another upload (its confirmation's evidence is
-- 'disturbed'). The analysis leaves a disturbed run out of its commit's value once the
-- commit has a run on the same machine that is not disturbed.
CREATE TABLE disturbed_runs (
    run_id      INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    -- series that moved together, of those judged (a value now and at the commit before)
    moved       INTEGER NOT NULL CHECK (moved >= 0),
    measured    INTEGER NOT NULL CHECK (measured >= moved),
    -- 1 when they got worse (slower), as load makes them; 0 when better
    worse       INTEGER NOT NULL CHECK (worse IN (0, 1)),
    detected_at INTEGER NOT NULL
);
