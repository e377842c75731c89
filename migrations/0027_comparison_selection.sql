-- What a comparison measures of each side. A confirmation re-measures only the suites (and, in
-- suites that can run a subset, the benchmarks) whose change it confirms: the rest of the
-- commit's suites cannot change its verdict and would only make it slower. JSON: a list of
-- {"suite": NAME, "benchmarks": [NAME, ...]} (no benchmarks: the whole suite); NULL: every
-- suite of the commits' configuration (try runs, pull requests).
ALTER TABLE comparisons ADD COLUMN selection TEXT;
