-- name: QueueSpan :one
-- What KubeMQ's QueuesInfo shows of a queue beside its counts: the bytes
-- (body and metadata) of its messages and their first and last sequence,
-- over the messages QueueStats counts as available, delayed or in flight
-- (not expired, not retained after an ack). One primary-key range scan.
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS now)
SELECT
    coalesce(sum(octet_length(m.body) + octet_length(m.metadata)), 0)::bigint AS bytes,
    coalesce(min(m.sequence), 0)::bigint AS first_sequence,
    coalesce(max(m.sequence), 0)::bigint AS last_sequence
FROM skipq.messages m, t,
     LATERAL (SELECT skipq.message_state(m.visible_at, m.receive_count, m.max_receive_count, m.lease_token, t.now) AS state) s
WHERE m.queue_id = @queue_id
  AND s.state <> 'acked'
  AND (m.expires_at IS NULL OR m.expires_at > t.now);
