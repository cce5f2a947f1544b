-- name: QueueGetByName :one
SELECT * FROM skipq.queues
WHERE tenant = @tenant AND name = @name;

-- name: QueueInsert :execrows
-- PUT, first half: creates the queue with the table's defaults (the one
-- place they are written, as for queues created on send) unless it exists;
-- one row affected means it was created. QueueSettingsUpdate follows in the
-- same transaction. NOT EXISTS keeps a PUT of an existing queue from
-- burning an identity value; ON CONFLICT settles a concurrent create.
INSERT INTO skipq.queues (tenant, name, fifo)
SELECT @tenant, @name, @fifo::boolean
WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = @tenant AND e.name = @name)
ON CONFLICT (tenant, name) DO NOTHING;

-- name: QueueSettingsUpdate :one
-- PUT, second half: sets the given settings and keeps the others.
UPDATE skipq.queues AS q SET
    visibility_seconds   = coalesce(sqlc.narg('visibility_seconds')::integer, q.visibility_seconds),
    receive_wait_seconds = coalesce(sqlc.narg('receive_wait_seconds')::integer, q.receive_wait_seconds),
    delay_seconds        = coalesce(sqlc.narg('delay_seconds')::integer, q.delay_seconds),
    expiration_seconds   = coalesce(sqlc.narg('expiration_seconds')::integer, q.expiration_seconds),
    max_receive_count    = coalesce(sqlc.narg('max_receive_count')::integer, q.max_receive_count),
    dead_letter_queue    = coalesce(sqlc.narg('dead_letter_queue')::text, q.dead_letter_queue),
    dedup_window_seconds = coalesce(sqlc.narg('dedup_window_seconds')::integer, q.dedup_window_seconds),
    content_based_dedup  = coalesce(sqlc.narg('content_based_dedup')::boolean, q.content_based_dedup)
WHERE q.tenant = @tenant AND q.name = @name
  -- fifo is fixed at creation: an update giving the other type changes
  -- nothing and returns no row.
  AND q.fifo = coalesce(sqlc.narg('fifo')::boolean, q.fifo)
RETURNING q.*;

-- name: QueueCreateMissing :exec
-- Auto-creation on send, requeue and dead-lettering: every name that does not
-- exist yet gets a queue with default settings (FIFO when @fifo). Concurrent creators are fine:
-- the loser's row is skipped by ON CONFLICT. NOT EXISTS keeps existing names
-- from being proposed at all, so the common case burns no identity value.
INSERT INTO skipq.queues (tenant, name, fifo)
SELECT @tenant, n.name, @fifo::boolean
FROM unnest(@names::text[]) AS n(name)
WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = @tenant AND e.name = n.name)
ON CONFLICT (tenant, name) DO NOTHING;

-- name: QueueList :many
-- Keyset pagination over the (tenant, name) unique index; `name >= prefix`
-- lets the scan start at the prefix instead of the tenant's first queue.
SELECT * FROM skipq.queues
WHERE tenant = @tenant
  AND name >= @prefix::text AND starts_with(name, @prefix::text)
  AND name > @after::text
ORDER BY name
LIMIT @max_queues;

-- name: QueueDelete :one
-- The queue's rows beside it (skipq.queue_retention, skipq.queue_trace,
-- its SQS move tasks and receive attempts) go with it: those tables have no
-- foreign key, which would lock skipq.queues while a migration creates
-- them. The history of its messages goes a day after their deletion, as
-- any gone message's (MessageEventsPrune).
WITH gone AS (
    DELETE FROM skipq.queues
    WHERE tenant = @tenant AND name = @name
    RETURNING id
), retention AS (
    DELETE FROM skipq.queue_retention r WHERE r.queue_id = (SELECT gone.id FROM gone)
), move_tasks AS (
    DELETE FROM skipq.sqs_move_tasks t WHERE t.source_queue_id = (SELECT gone.id FROM gone)
), attempts AS (
    DELETE FROM skipq.sqs_receive_attempts a WHERE a.queue_id = (SELECT gone.id FROM gone)
), trace AS (
    DELETE FROM skipq.queue_trace x WHERE x.queue_id = (SELECT gone.id FROM gone)
)
SELECT gone.id FROM gone;

-- name: QueueRetentionSet :exec
-- PUT with retainAckedSeconds: the queue's row in skipq.queue_retention
-- (migration 00027), none for 0.
WITH off AS (
    DELETE FROM skipq.queue_retention r WHERE r.queue_id = @queue_id AND @seconds::integer = 0
)
INSERT INTO skipq.queue_retention (queue_id, seconds)
SELECT @queue_id, @seconds::integer WHERE @seconds::integer > 0
ON CONFLICT (queue_id) DO UPDATE SET seconds = excluded.seconds;

-- name: QueueTraceSet :exec
-- PUT with trace: the queue's row in skipq.queue_trace (migration 00030),
-- none when off.
WITH off AS (
    DELETE FROM skipq.queue_trace x WHERE x.queue_id = @queue_id AND NOT @trace::boolean
)
INSERT INTO skipq.queue_trace (queue_id)
SELECT @queue_id WHERE @trace::boolean
ON CONFLICT (queue_id) DO NOTHING;

-- name: QueueSideSettingsList :many
-- The settings that tables beside skipq.queues hold, one row for each of
-- the queues: retainAckedSeconds (skipq.queue_retention, 0 without a row)
-- and trace (a row in skipq.queue_trace).
SELECT u.id::bigint AS queue_id, coalesce(r.seconds, 0)::integer AS retain_acked_seconds,
       EXISTS (SELECT 1 FROM skipq.queue_trace t WHERE t.queue_id = u.id) AS trace
FROM unnest(@queue_ids::bigint[]) AS u(id)
LEFT JOIN skipq.queue_retention r ON r.queue_id = u.id;

-- name: QueueStats :one
-- Counted at request time from the queue's own rows (one primary-key range
-- scan). States are exclusive: an expired message is in none of them, and a
-- message whose last allowed lease ran out counts as in flight until the
-- worker dead-letters it.
-- A retained message (acked, docs/API.md#model) is counted apart, as acked, until
-- its retention ends. The topic copies the queue has yet to make
-- (skipq.topic_pending) are available, sent at their publish (their
-- expiry is applied when they are made).
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS now),
pending AS (
    SELECT coalesce(sum(cardinality(p.body_ids)), 0) AS copies, min(p.published_at) AS oldest
    FROM skipq.topic_pending p WHERE p.queue_id = @queue_id
)
SELECT
    (count(*) FILTER (WHERE s.state = 'available') + (SELECT p.copies FROM pending p))::bigint AS available,
    count(*) FILTER (WHERE s.state = 'delayed')::bigint AS delayed,
    count(*) FILTER (WHERE s.state = 'in_flight')::bigint AS in_flight,
    count(*) FILTER (WHERE s.state = 'acked')::bigint AS acked,
    least(min(coalesce(m.delayed_to, m.sent_at)) FILTER (WHERE s.state = 'available'),
          (SELECT p.oldest FROM pending p)) AS oldest_available_at,
    count(DISTINCT m.group_id)::bigint AS groups
FROM skipq.messages m, t,
     LATERAL (SELECT skipq.message_state(m.visible_at, m.receive_count, m.max_receive_count, m.lease_token, t.now) AS state) s
WHERE m.queue_id = @queue_id
  AND (m.expires_at IS NULL OR m.expires_at > t.now);

-- name: QueueTenantsByID :many
SELECT id, tenant, name FROM skipq.queues WHERE id = ANY(@ids::bigint[]);

-- name: WakeNotify :exec
-- One short transaction announcing that messages became available in some
-- queues, sent outside the data transactions (skipq.wake writes the
-- notifications).
SELECT skipq.wake(@source::text, @queue_ids::bigint[], @counts::integer[]);

-- name: JobTakeTurn :one
-- A cluster-wide job's turn: true for the one node that moves the job's row
-- forward once @period_seconds have passed since its last run.
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS now),
taken AS (
    UPDATE skipq.job_turns j SET last_run = t.now
    FROM t
    WHERE j.job = @job AND j.last_run <= t.now - make_interval(secs => @period_seconds::integer)
    RETURNING j.job
)
SELECT EXISTS (SELECT 1 FROM taken)::boolean AS taken;

-- name: QueueCountsStep :one
-- One bounded step of the gauge snapshot's count (skipq.queue_counts_step):
-- true when it finished a pass and replaced the snapshot.
SELECT skipq.queue_counts_step(sqlc.narg('now')::timestamptz, @period_seconds::integer, @max_pages::integer)::boolean AS published;

-- name: QueueCountsList :many
-- The gauge snapshot, largest queues first (at most @max_queues).
SELECT * FROM skipq.queue_counts
ORDER BY available + delayed + in_flight DESC
LIMIT @max_queues;

-- name: QueueListByNames :many
-- The caller's queues among the given names (search's queue filter).
SELECT * FROM skipq.queues WHERE tenant = @tenant AND name = ANY(@names::text[]) ORDER BY name;
