-- kymo's initial schema. Series (what is measured) are kept apart from measurements (the
-- points), as rustc-perf does, so that trend queries scan one narrow index.

CREATE TABLE repositories (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    url         TEXT    NOT NULL,
    branch      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE commits (
    id            INTEGER PRIMARY KEY,
    repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    sha           TEXT    NOT NULL,
    -- space-separated parent shas, first parent first
    parents       TEXT    NOT NULL,
    author        TEXT    NOT NULL,
    committed_at  INTEGER NOT NULL,
    message       TEXT    NOT NULL,
    -- index on the tracked branch's first-parent chain, 0 = root; NULL when off that chain
    position      INTEGER,
    UNIQUE (repository_id, sha)
);
CREATE INDEX commits_by_position ON commits (repository_id, position);

CREATE TABLE machines (
    id             INTEGER PRIMARY KEY,
    fingerprint    TEXT    NOT NULL UNIQUE,
    name           TEXT    NOT NULL,
    cpu_model      TEXT    NOT NULL,
    logical_cores  INTEGER NOT NULL,
    physical_cores INTEGER NOT NULL,
    memory_gib     INTEGER NOT NULL,
    arch           TEXT    NOT NULL,
    virtualization TEXT    NOT NULL,
    first_seen_at  INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL
);

CREATE TABLE tokens (
    id           INTEGER PRIMARY KEY,
    name         TEXT    NOT NULL,
    scope        TEXT    NOT NULL CHECK (scope IN ('admin', 'worker', 'upload')),
    -- SHA-256 of the token; the token itself is shown once and never stored
    hash         TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    repository_id    INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    commit_id        INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    -- the machine that must run it; NULL until claimed when no machine was registered
    machine_id       INTEGER REFERENCES machines(id),
    state            TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 3,
    lease_id         TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER,
    error            TEXT,
    log_tail         TEXT
);
CREATE INDEX jobs_by_state ON jobs (state, priority DESC, id);
-- the same commit is never waiting twice for the same machine
CREATE UNIQUE INDEX jobs_one_active_per_machine ON jobs (commit_id, machine_id)
    WHERE state IN ('queued', 'running');

CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    commit_id   INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    -- the job whose completion stored this run; UNIQUE makes a completion count once
    job_id      INTEGER UNIQUE REFERENCES jobs(id),
    source      TEXT    NOT NULL CHECK (source IN ('worker', 'upload')),
    kernel      TEXT    NOT NULL,
    toolchain   TEXT    NOT NULL,
    governor    TEXT    NOT NULL,
    hostname    TEXT    NOT NULL,
    log         TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX runs_by_commit ON runs (commit_id, machine_id);

CREATE TABLE benchmarks (
    id            INTEGER PRIMARY KEY,
    repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    -- the benchmark's identity: name{param=value,...}
    name          TEXT    NOT NULL,
    suite         TEXT    NOT NULL,
    UNIQUE (repository_id, name)
);

CREATE TABLE series (
    id           INTEGER PRIMARY KEY,
    benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
    metric       TEXT    NOT NULL,
    unit         TEXT    NOT NULL,
    direction    TEXT    NOT NULL CHECK (direction IN ('lower', 'higher')),
    machine_id   INTEGER NOT NULL REFERENCES machines(id),
    UNIQUE (benchmark_id, metric, machine_id)
);

CREATE TABLE measurements (
    id        INTEGER PRIMARY KEY,
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    commit_id INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    value     REAL    NOT NULL,
    -- raw samples as a JSON array of numbers; '[]' when the tool gave one value
    samples   TEXT    NOT NULL,
    -- base64 HdrHistogram V2, when measured
    hdr       TEXT,
    UNIQUE (run_id, series_id)
);
CREATE INDEX measurements_by_series ON measurements (series_id, commit_id);
