-- GitLab joins the forges kymo posts commit statuses and pull request feedback to. SQLite
-- cannot change a CHECK constraint in place: the table is rebuilt with its rows. Nothing
-- references it, so foreign keys are not disturbed.
CREATE TABLE commit_status_targets_new (
    repository_id INTEGER PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
    kind          TEXT    NOT NULL CHECK (kind IN ('github', 'gitea', 'gitlab')),
    api_url       TEXT    NOT NULL,
    -- owner/name on the forge (GitLab: group/.../project)
    slug          TEXT    NOT NULL,
    -- the forge's API token: needed in clear to post, never shown back in full
    token         TEXT    NOT NULL,
    updated_at    INTEGER NOT NULL
);
INSERT INTO commit_status_targets_new (repository_id, kind, api_url, slug, token, updated_at)
    SELECT repository_id, kind, api_url, slug, token, updated_at FROM commit_status_targets;
DROP TABLE commit_status_targets;
ALTER TABLE commit_status_targets_new RENAME TO commit_status_targets;
