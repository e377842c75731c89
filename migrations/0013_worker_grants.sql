-- Labels an admin grants to a worker token (`kymo token create --worker NAME --labels a,b`): a
-- worker's claim may use no others, so a token cannot take the jobs of a restricted repository
-- by declaring its label.
ALTER TABLE tokens ADD COLUMN labels TEXT NOT NULL DEFAULT '';
-- The token a running job was leased to: only it may renew the lease or complete the job.
ALTER TABLE jobs ADD COLUMN leased_token_id INTEGER REFERENCES tokens(id);
-- The idempotency keys of uploads (`Idempotency-Key`; `kymo upload` sends the digest of what
-- it uploads): a retried upload, after a timeout that came when its run was already stored,
-- finds that run instead of storing a copy.
CREATE TABLE upload_keys (
    repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    key           TEXT    NOT NULL,
    run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    measurements  INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (repository_id, key)
);
