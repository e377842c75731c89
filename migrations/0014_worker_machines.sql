-- Whether a machine runs a worker (it has claimed work), as opposed to one known only from
-- uploads: only the former get queued jobs, which the latter would leave waiting forever.
ALTER TABLE machines ADD COLUMN runs_worker INTEGER NOT NULL DEFAULT 0 CHECK (runs_worker IN (0, 1));
UPDATE machines SET runs_worker = 1
    WHERE id IN (SELECT machine_id FROM jobs WHERE machine_id IS NOT NULL);
