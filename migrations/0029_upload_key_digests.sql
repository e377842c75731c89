-- What an upload under an idempotency key held (a SHA-256 of its commit, machine, environment
-- and results): the same key sent again with other results is refused instead of answering
-- with the first run and dropping them. Keys stored before this migration have none and are
-- taken as matching.
ALTER TABLE upload_keys ADD COLUMN digest TEXT;
