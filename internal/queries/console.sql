-- name: ConsoleQueueList :many
-- The console's queues page: a tenant's queues by name (as QueueList) with
-- their gauge snapshot, and whether some queue of the tenant names each as
-- its dead-letter queue. Reads only the tenant's queues and the small
-- snapshot table, never the messages (ConsoleQueueCountsNow counts the
-- small ones): the page polls it every 5 s. The dead-letter queues' names
-- take a read of all the tenant's queues (no index has deadLetterQueue;
-- measured at 10,000 queues: about 4 ms, against 0.3 ms without). A queue
-- created after the last snapshot has no snapshot counts yet.
WITH dlq AS (
    SELECT DISTINCT s.dead_letter_queue AS name FROM skipq.queues s
    WHERE s.tenant = @tenant AND s.dead_letter_queue <> ''
)
SELECT q.id, q.name, q.fifo, c.available, c.delayed, c.in_flight, c.dead_lettered, c.oldest_available_at,
       c.counted_at, (dlq.name IS NOT NULL)::boolean AS dead_letter_queue
FROM skipq.queues q
LEFT JOIN skipq.queue_counts c ON c.queue_id = q.id
LEFT JOIN dlq ON dlq.name = q.name
WHERE q.tenant = @tenant
  AND q.name >= @prefix::text AND starts_with(q.name, @prefix::text)
  AND q.name > @after::text
ORDER BY q.name
LIMIT @max_queues;

-- name: ConsoleQueueCountsNow :many
-- The queues page's counts at request time, of the queues that hold fewer
-- than @read_limit messages (complete); of a larger one only that many are
-- read (complete false), and the page shows its snapshot. States as in
-- QueueStats, at clock_timestamp() (see MessageBrowse).
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS now)
SELECT q.id::bigint AS queue_id,
    count(m.sequence) FILTER (WHERE s.state = 'available')::bigint AS available,
    count(m.sequence) FILTER (WHERE s.state = 'delayed')::bigint AS delayed,
    count(m.sequence) FILTER (WHERE s.state = 'in_flight')::bigint AS in_flight,
    min(coalesce(m.delayed_to, m.sent_at)) FILTER (WHERE s.state = 'available') AS oldest_available_at,
    (count(m.sequence) < @read_limit::bigint)::boolean AS complete
FROM unnest(@queue_ids::bigint[]) AS q(id)
CROSS JOIN t
LEFT JOIN LATERAL (
    SELECT x.sequence, x.visible_at, x.receive_count, x.max_receive_count, x.lease_token, x.delayed_to, x.sent_at
    FROM skipq.messages x
    WHERE x.queue_id = q.id AND (x.expires_at IS NULL OR x.expires_at > t.now)
    LIMIT @read_limit::bigint) m ON true
LEFT JOIN LATERAL (SELECT skipq.message_state(m.visible_at, m.receive_count, m.max_receive_count, m.lease_token, t.now) AS state) s ON true
GROUP BY q.id;

-- name: ConsoleQueueCounts :one
-- One queue's gauge snapshot (its dead-lettered count on the queue page).
SELECT c.dead_lettered, c.counted_at
FROM skipq.queue_counts c
WHERE c.queue_id = @queue_id;

-- name: DepthHistoryRecord :execrows
-- Copies the current gauge snapshot into the depth history, once per
-- snapshot (a snapshot already copied adds nothing): the queues with some
-- message, at most @max_queues of the deepest.
WITH snap AS (
    INSERT INTO skipq.depth_snapshots (at)
    SELECT max(counted_at) FROM skipq.queue_counts
    HAVING max(counted_at) IS NOT NULL
    ON CONFLICT (at) DO NOTHING
    RETURNING at
)
INSERT INTO skipq.depth_history (queue_id, tenant, at, available, delayed, in_flight, dead_lettered)
SELECT c.queue_id, c.tenant, c.counted_at, c.available, c.delayed, c.in_flight, c.dead_lettered
FROM skipq.queue_counts c
JOIN snap ON snap.at = c.counted_at
WHERE c.available + c.delayed + c.in_flight + c.dead_lettered > 0
ORDER BY c.available + c.delayed + c.in_flight + c.dead_lettered DESC
LIMIT @max_queues;

-- name: DepthHistoryPrune :execrows
-- Drops up to @max_rows history rows taken before @before, oldest first.
DELETE FROM skipq.depth_history h
USING (
    SELECT o.queue_id, o.at FROM skipq.depth_history o
    WHERE o.at < @before
    ORDER BY o.at
    LIMIT @max_rows
) old
WHERE h.queue_id = old.queue_id AND h.at = old.at;

-- name: DepthSnapshotsPrune :execrows
-- Snapshot times before @before (one a minute: a run drops a handful).
DELETE FROM skipq.depth_snapshots WHERE at < @before;

-- name: DepthHistoryTenant :many
-- A tenant's total depth at every snapshot since @since: the sums come from
-- a range scan of the tenant's rows on (tenant, at), then meet the
-- snapshot times (a snapshot with no row of the tenant is 0).
WITH h AS (
    SELECT d.at, sum(d.available) AS available, sum(d.delayed) AS delayed,
           sum(d.in_flight) AS in_flight, sum(d.dead_lettered) AS dead_lettered
    FROM skipq.depth_history d
    WHERE d.tenant = @tenant AND d.at >= @since
    GROUP BY d.at
)
SELECT s.at,
    coalesce(h.available, 0)::bigint AS available,
    coalesce(h.delayed, 0)::bigint AS delayed,
    coalesce(h.in_flight, 0)::bigint AS in_flight,
    coalesce(h.dead_lettered, 0)::bigint AS dead_lettered
FROM skipq.depth_snapshots s
LEFT JOIN h ON h.at = s.at
WHERE s.at >= @since
ORDER BY s.at;

-- name: DepthHistoryQueue :many
-- One queue's depth at every snapshot since @since.
SELECT s.at,
    coalesce(h.available, 0)::bigint AS available,
    coalesce(h.delayed, 0)::bigint AS delayed,
    coalesce(h.in_flight, 0)::bigint AS in_flight,
    coalesce(h.dead_lettered, 0)::bigint AS dead_lettered
FROM skipq.depth_snapshots s
LEFT JOIN skipq.depth_history h ON h.queue_id = @queue_id AND h.at = s.at
WHERE s.at >= @since
ORDER BY s.at;

-- name: APIKeyGetByID :one
-- A console session's key, checked again as the session is used: a
-- revoked key ends its sessions.
SELECT * FROM skipq.api_keys
WHERE id = @id AND revoked_at IS NULL;
