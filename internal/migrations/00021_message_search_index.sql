-- +goose NO TRANSACTION
-- +goose Up
-- Search across queues (SPEC §16.2, GET /v1/messages) lists newest first:
-- each candidate queue is walked by this index from the cursor on
-- (sent_at descending, ties by sequence), so a page reads about what it
-- returns per queue instead of sorting the tenant's messages. sent_at and
-- sequence never change after the insert, so a claim, which changes only
-- unindexed columns, stays a HOT update. Built CONCURRENTLY (outside a
-- transaction): nodes of the previous release keep sending and claiming
-- while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_queue_sent_idx
    ON skipq.messages (queue_id, sent_at DESC, sequence);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS skipq.messages_queue_sent_idx;
