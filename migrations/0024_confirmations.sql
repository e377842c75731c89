-- Confirmation of change points before they are announced: the suspect commit and its
-- baseline measured again, alternately, on the machine that found the change (a comparison
-- job, shared with try runs and pull requests), or instruction counts that moved with the
-- time. Only a confirmed change is alerted; a refuted one is closed as a false positive and
-- keeps here what was re-run and what it found.

-- Whether a repository's changes are confirmed before they are announced (1, the default) or
-- announced as soon as they are found (0).
ALTER TABLE repositories ADD COLUMN confirm_changes INTEGER NOT NULL DEFAULT 1
    CHECK (confirm_changes IN (0, 1));

CREATE TABLE confirmations (
    regression_id INTEGER PRIMARY KEY REFERENCES regressions(id) ON DELETE CASCADE,
    state         TEXT    NOT NULL
                  CHECK (state IN ('confirming', 'confirmed', 'refuted', 'unconfirmed')),
    -- what decided it (or will): 'interleaved' (a comparison job), 'instructions' (instruction
    -- counts moved with the time), or why nothing could be re-run: 'no-worker', 'no-baseline',
    -- 'failed'
    evidence      TEXT    NOT NULL,
    -- the comparison measuring it now (or that measured it last); an escalation to more
    -- rounds keeps the first one in earlier_comparison_id, and both are judged together
    comparison_id INTEGER REFERENCES comparisons(id) ON DELETE SET NULL,
    earlier_comparison_id INTEGER REFERENCES comparisons(id) ON DELETE SET NULL,
    rounds_run    INTEGER NOT NULL DEFAULT 0,
    -- the change measured again (interleaved) or the change of instruction counts, in percent
    change_pct    REAL,
    p_value       REAL,
    note          TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    decided_at    INTEGER
);
CREATE INDEX confirmations_by_comparison ON confirmations (comparison_id)
    WHERE comparison_id IS NOT NULL;
CREATE INDEX confirmations_pending ON confirmations (state) WHERE state = 'confirming';
