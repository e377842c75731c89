-- Adaptive comparisons. A try run, a pull request and a confirmation measure rounds of base
-- and head until every benchmark is decided (a significant change, or a change inside the
-- equivalence margin) or their time budget is spent; `rounds` is then the most they may run.
-- budget_seconds NULL: exactly `rounds` rounds (comparisons from before, `kymo try --rounds N`).
ALTER TABLE comparisons ADD COLUMN budget_seconds INTEGER
    CHECK (budget_seconds IS NULL OR budget_seconds BETWEEN 10 AND 86400);

-- The budget of a repository's try runs and pull requests (`kymo repo set NAME --budget`).
ALTER TABLE repositories ADD COLUMN comparison_budget_seconds INTEGER NOT NULL DEFAULT 600
    CHECK (comparison_budget_seconds BETWEEN 10 AND 86400);
