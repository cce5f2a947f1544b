-- +goose Up
-- The queue setting of SPEC §16.4 (retention of acked messages, migration
-- 00028): retainAckedSeconds, one row per queue that retains (absent = 0).
-- Beside skipq.queues rather than a column of it: ADD COLUMN takes ACCESS
-- EXCLUSIVE on skipq.queues, which nearly every request reads, and
-- TestOnlineMigration caught it held while nodes served (a new table locks
-- nothing that exists). No foreign key, for the same reason (it would take
-- SHARE ROW EXCLUSIVE on skipq.queues): QueueDelete deletes the row with
-- its queue. Read by primary key by the acks (skipq.message_ack,
-- message_claim_and_delete, message_claim_grouped) and with the queue's
-- settings.
CREATE TABLE skipq.queue_retention (
    queue_id bigint  PRIMARY KEY,
    seconds  integer NOT NULL CHECK (seconds > 0)
);

-- +goose Down
DROP TABLE skipq.queue_retention;
