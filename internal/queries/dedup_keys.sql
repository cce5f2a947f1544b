-- Keys are looked up and written by skipq.message_insert
-- (internal/migrations/current/functions/message_insert.sql).

-- name: DedupKeyDeleteExpired :execrows
-- Worker: drops up to @max_keys keys whose window has passed and whose
-- message has left the queue. The keys are taken as an array of
-- addresses, chosen once, and each message is probed by a range of its id
-- in id order, which only messages_message_id_queue_key serves (sorts are
-- off): planned on drained statistics, `(queue_id, message_id) IN (…)` was
-- a semi join that chose the keys again for every key of the table (each
-- time with its own LIMIT), and the NOT EXISTS an anti join that walked the
-- message id index for every key.
DELETE FROM skipq.dedup_keys k
WHERE k.ctid = ANY(ARRAY(
    SELECT c.ctid FROM skipq.dedup_keys c
    WHERE c.window_ends <= coalesce(sqlc.narg('now')::timestamptz, now())
      AND (SELECT m.sequence FROM skipq.messages m
           WHERE m.message_id >= coalesce(c.result_message_id, c.message_id)
             AND m.message_id <= coalesce(c.result_message_id, c.message_id)
             AND m.queue_id = c.queue_id
           ORDER BY m.message_id LIMIT 1) IS NULL
    LIMIT @max_keys
    FOR UPDATE SKIP LOCKED));
