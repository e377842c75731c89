-- Browser sessions of admins: created by logging in with an admin token, ended by logging out,
-- by expiry, or by revoking the token they came from.
CREATE TABLE sessions (
    id         INTEGER PRIMARY KEY,
    -- SHA-256 of the cookie's value; the value itself is never stored
    hash       TEXT    NOT NULL UNIQUE,
    token_id   INTEGER NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    -- the anti-forgery token every form and unsafe request of this session must carry
    csrf       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
