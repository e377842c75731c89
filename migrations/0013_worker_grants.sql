-- Labels an admin grants to a worker token (`kymo token create --worker NAME --labels a,b`): a
-- worker's claim may use no others, so a token cannot take the jobs of a restricted repository
-- by declaring its label.
ALTER TABLE tokens ADD COLUMN labels TEXT NOT NULL DEFAULT '';
-- The token a running job was leased to: only it may renew the lease or complete the job.
ALTER TABLE jobs ADD COLUMN leased_token_id INTEGER REFERENCES tokens(id);
