-- The commits over which a change point's level moved: 1 for a step at commit_id; for a slow
-- drift, the length of its ramp, which starts at commit_id (where the level started to move)
-- and reaches the new level at its last commit.
ALTER TABLE regressions ADD COLUMN span INTEGER NOT NULL DEFAULT 1 CHECK (span >= 1);
