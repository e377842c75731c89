-- Credentials for private git remotes: an HTTPS user and token, or an SSH key file on the
-- fetching machines with its passphrase. One per repository; kept apart from `repositories`
-- so that no query listing repositories can carry a secret by accident.
CREATE TABLE repository_credentials (
    repository_id INTEGER PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
    kind          TEXT    NOT NULL CHECK (kind IN ('https', 'ssh')),
    -- https: the user name
    username      TEXT,
    -- https: the token; ssh: the key's passphrase, if any
    secret        TEXT,
    -- ssh: the private key file's path on the server's and the workers' machines
    key_path      TEXT,
    updated_at    INTEGER NOT NULL,
    CHECK ((kind = 'https' AND username IS NOT NULL AND secret IS NOT NULL AND key_path IS NULL)
        OR (kind = 'ssh' AND username IS NULL AND key_path IS NOT NULL))
);
