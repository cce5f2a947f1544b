-- +goose Up
-- The messageId index leads with message_id instead of queue_id. Lookups by
-- (queue_id, message_id) use it the same way, but a condition on queue_id
-- alone can no longer pick it: the claim and the settle statements then
-- have exactly one index that fits, the primary key. Queue tables are often
-- analyzed while nearly empty, and with such statistics the planner rated
-- "queue_id = X" on this index as cheap as the primary key and chose it
-- (a bitmap scan over the whole queue plus a sort, measured at 4,717 buffers
-- for a 100-message claim under load; docs/PERFORMANCE.md).
CREATE UNIQUE INDEX messages_message_id_queue_key ON skipq.messages (message_id, queue_id);
DROP INDEX skipq.messages_queue_message_id_key;

-- +goose Down
CREATE UNIQUE INDEX messages_queue_message_id_key ON skipq.messages (queue_id, message_id);
DROP INDEX skipq.messages_message_id_queue_key;
