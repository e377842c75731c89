-- The walk down a tracked branch (a window of a series, the commits a zoomed-out chart names)
-- reads each commit's sha and time beside its position: with them in the index it no longer
-- seeks the commits table once a commit (RELIABILITY.md, "Pages at any history").
DROP INDEX commits_by_position;
CREATE INDEX commits_by_position ON commits (repository_id, position, sha, committed_at);
