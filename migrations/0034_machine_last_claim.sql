-- The queue takes turns: after a confirmation, a machine's next claim prefers any other job
-- waiting for it (history included), so that confirmations never run twice in a row while
-- history waits. Why the machine's last claimed job was queued (a job reason), kept with the
-- machine: start times have whole seconds, too coarse to order claims by.
ALTER TABLE machines ADD COLUMN last_claim_reason TEXT;
