-- Keys are looked up and written by skipq.message_insert
-- (internal/migrations/current/functions/message_insert.sql).

-- name: DedupKeyDeleteExpired :execrows
-- Worker: drops up to @max_keys keys whose window has passed and whose
-- message has left the queue.
DELETE FROM skipq.dedup_keys k
WHERE (k.queue_id, k.message_id) IN (
    SELECT c.queue_id, c.message_id FROM skipq.dedup_keys c
    WHERE c.window_ends <= coalesce(sqlc.narg('now')::timestamptz, now())
      AND NOT EXISTS (SELECT 1 FROM skipq.messages m
                      WHERE m.queue_id = c.queue_id AND m.message_id = coalesce(c.result_message_id, c.message_id))
    LIMIT @max_keys
    FOR UPDATE SKIP LOCKED);
