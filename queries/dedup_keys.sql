-- name: DedupKeyFindLive :many
-- The live idempotency keys among @message_ids: still inside the dedup window,
-- or whose message is still in the queue.
SELECT k.* FROM skipq.dedup_keys k
WHERE k.queue_id = @queue_id
  AND k.message_id = ANY(@message_ids::text[])
  AND (k.window_ends > coalesce(sqlc.narg('now')::timestamptz, now())
       OR EXISTS (SELECT 1 FROM skipq.messages m
                  WHERE m.queue_id = k.queue_id AND m.message_id = k.message_id));

-- name: DedupKeyInsert :exec
-- Records the keys of messages just sent in this transaction, with their send
-- results read back from the messages themselves. A key still present but no
-- longer live (window over, message gone) is replaced.
INSERT INTO skipq.dedup_keys AS k (
    queue_id, message_id, content_hash, sequence, sent_at, delayed_to, expires_at, window_ends)
SELECT m.queue_id, m.message_id, r.content_hash, m.sequence, m.sent_at, m.delayed_to, m.expires_at,
       m.sent_at + make_interval(secs => q.dedup_window_seconds)
FROM skipq.queues q
CROSS JOIN generate_subscripts(@message_ids::text[], 1) AS i
CROSS JOIN LATERAL (SELECT
    (@message_ids::text[])[i] AS message_id,
    (@content_hashes::bytea[])[i] AS content_hash
) r
JOIN skipq.messages m ON m.queue_id = q.id AND m.message_id = r.message_id
WHERE q.id = @queue_id
ON CONFLICT (queue_id, message_id) DO UPDATE SET
    content_hash = excluded.content_hash,
    sequence     = excluded.sequence,
    sent_at      = excluded.sent_at,
    delayed_to   = excluded.delayed_to,
    expires_at   = excluded.expires_at,
    window_ends  = excluded.window_ends;

-- name: DedupKeyDeleteExpired :execrows
-- Worker: drops up to @max_keys keys whose window has passed and whose
-- message has left the queue.
DELETE FROM skipq.dedup_keys k
WHERE (k.queue_id, k.message_id) IN (
    SELECT c.queue_id, c.message_id FROM skipq.dedup_keys c
    WHERE c.window_ends <= coalesce(sqlc.narg('now')::timestamptz, now())
      AND NOT EXISTS (SELECT 1 FROM skipq.messages m
                      WHERE m.queue_id = c.queue_id AND m.message_id = c.message_id)
    LIMIT @max_keys
    FOR UPDATE SKIP LOCKED);
