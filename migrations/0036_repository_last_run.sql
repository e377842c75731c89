-- When a repository last stored a run, kept on the repository by ingest: the home page read it
-- as the newest of every run of every commit of the repository, which grew with history (43 ms
-- at 100,000 commits against 4 ms at 10,000). Filled once here from the runs stored so far.
ALTER TABLE repositories ADD COLUMN last_run_at INTEGER;

UPDATE repositories SET last_run_at = (
    SELECT max(u.created_at) FROM runs u JOIN commits c ON c.id = u.commit_id
    WHERE c.repository_id = repositories.id);

-- The repository page's history reads the jobs of its 50 commits: without an index leading
-- with the commit it scanned every job of every repository (one or more per commit measured).
CREATE INDEX jobs_by_commit ON jobs (commit_id);
