-- An upload token may be limited to one repository (`kymo token create --upload NAME --repo R`):
-- the CI secret of one project cannot store results in another's history or comment on its
-- pull requests. NULL: any repository (admin and worker tokens, older upload tokens). A
-- repository's tokens go with it: a token of a repository made again under the same name must
-- not reach the new one.
ALTER TABLE tokens ADD COLUMN repository_id INTEGER REFERENCES repositories(id) ON DELETE CASCADE;
