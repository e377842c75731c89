-- Comparisons measured in CI (`kymo upload --pull-request N`): the CI job uploads the head's
-- results, and the base is either the results the same job uploads (measured on the same
-- runner) or the base commit's stored results on the same machine fingerprint. No kymo worker
-- interleaves them and they have no job: their results are stored as they arrive.
--   interleaved: a kymo worker measured base and head alternately (try runs, webhooks)
--   same-job:    CI measured both sides in one job
--   stored-base: CI measured the head; the base's results were already stored
ALTER TABLE comparisons ADD COLUMN measured TEXT NOT NULL DEFAULT 'interleaved'
    CHECK (measured IN ('interleaved', 'same-job', 'stored-base'));
-- The upload's Idempotency-Key: the same upload again (a retried CI step) finds its comparison.
ALTER TABLE comparisons ADD COLUMN upload_key TEXT;
CREATE UNIQUE INDEX comparisons_by_upload_key ON comparisons (repository_id, upload_key)
    WHERE upload_key IS NOT NULL;
