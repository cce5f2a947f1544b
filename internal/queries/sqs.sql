-- name: SQSQueueGet :one
-- A queue as the SQS endpoint sees it: its native row and its SQS extras
-- (absent: SQS defaults).
SELECT q.*, x.attributes AS sqs_attributes, x.tags AS sqs_tags,
       x.max_message_bytes AS sqs_max_message_bytes, x.updated_at AS sqs_updated_at
FROM skipq.queues q
LEFT JOIN skipq.sqs_queues x ON x.queue_id = q.id
WHERE q.tenant = @tenant AND q.name = @name;

-- name: SQSQueuePut :exec
-- Writes a queue's SQS extras; NULL arguments keep the current values.
INSERT INTO skipq.sqs_queues AS x (queue_id, attributes, tags, max_message_bytes, updated_at)
VALUES (@queue_id, coalesce(sqlc.narg('attributes')::jsonb, '{}'), coalesce(sqlc.narg('tags')::jsonb, '{}'),
        sqlc.narg('max_message_bytes')::integer, now())
ON CONFLICT (queue_id) DO UPDATE SET
    attributes        = coalesce(sqlc.narg('attributes')::jsonb, x.attributes),
    tags              = coalesce(sqlc.narg('tags')::jsonb, x.tags),
    max_message_bytes = coalesce(sqlc.narg('max_message_bytes')::integer, x.max_message_bytes),
    updated_at        = now();

-- name: SQSDeadLetterSources :many
-- Queues of a tenant whose dead-letter queue is @name, by name after @after.
SELECT name FROM skipq.queues
WHERE tenant = @tenant AND dead_letter_queue = @name AND name > @after
ORDER BY name
LIMIT @max_queues;

-- name: SQSCredentialsGet :one
-- A key's access key id, if it has one.
SELECT access_key_id FROM skipq.sqs_credentials WHERE key_id = @key_id;

-- name: SQSCredentialsCreate :one
-- Gives a key an access key id; a key that already has one keeps it.
WITH ins AS (
    INSERT INTO skipq.sqs_credentials (access_key_id, key_id)
    SELECT @access_key_id, k.id FROM skipq.api_keys k WHERE k.id = @key_id
    ON CONFLICT (key_id) DO NOTHING
    RETURNING access_key_id
)
SELECT access_key_id FROM ins
UNION ALL
SELECT c.access_key_id FROM skipq.sqs_credentials c WHERE c.key_id = @key_id
LIMIT 1;

-- name: SQSCredentialsAuthenticate :one
-- The live key an access key id belongs to.
SELECT k.* FROM skipq.sqs_credentials c
JOIN skipq.api_keys k ON k.id = c.key_id
WHERE c.access_key_id = @access_key_id AND k.revoked_at IS NULL;

-- name: SQSCredentialsList :many
SELECT key_id, access_key_id FROM skipq.sqs_credentials;

-- name: SQSReadyAgain :many
-- Makes messages that a receive with visibility 0 just claimed available
-- again at once, their handles kept (docs/DESIGN.md#the-sqs-endpoint (D4)): the claim left them
-- unready until their (immediate) lease-end timer fired, up to a worker
-- tick later. A message on its last allowed delivery stays with the
-- worker, which dead-letters it, as after any lease. Message first, then
-- its ready row: the lock order of every statement that waits for a lock.
--
-- Each message by its address, found with its token by skipq.receipt_rows
-- (a probe that only the primary key serves: SQSMessagesInFlight says
-- why). A row another transaction changed meanwhile (the worker readied
-- it, or its lease moved on) is not at that address any more and is left
-- as it is.
WITH readied AS (
    UPDATE skipq.messages m SET ready = true
    WHERE m.ctid = ANY(ARRAY(SELECT r.address
                             FROM skipq.receipt_rows(@queue_ids::bigint[], @sequences::bigint[], @tokens::bytea[])
                                  AS r(address, n)))
      AND NOT m.ready AND m.receive_count < m.max_receive_count
    RETURNING m.queue_id, m.sequence
)
INSERT INTO skipq.ready (queue_id, sequence)
SELECT r.queue_id, r.sequence FROM readied r
ON CONFLICT DO NOTHING
RETURNING queue_id;

-- name: SQSMoveTaskStart :one
-- Records a new move task of a source queue; the unique index on active
-- tasks refuses a second one. Keeps the source's ten most recent tasks (SQS
-- lists no more): older finished ones go.
WITH pruned AS (
    DELETE FROM skipq.sqs_move_tasks t
    WHERE t.source_queue_id = @source_queue_id AND t.status NOT IN ('RUNNING', 'CANCELLING')
      AND t.id IN (SELECT o.id FROM skipq.sqs_move_tasks o WHERE o.source_queue_id = @source_queue_id
                   ORDER BY o.id DESC OFFSET 9)
)
INSERT INTO skipq.sqs_move_tasks (source_queue_id, destination, max_per_second, to_move, runner)
VALUES (@source_queue_id, @destination, sqlc.narg('max_per_second')::integer, @to_move, @runner)
RETURNING *;

-- name: SQSMoveTaskProgress :one
-- A runner's step: adds what it moved, ends the task when it is done or
-- cancelled, notes a failure, and beats. No row: another runner took the
-- task over, and this one stops.
UPDATE skipq.sqs_move_tasks SET
    moved          = moved + @moved,
    heartbeat_at   = now(),
    status         = CASE WHEN status = 'CANCELLING' THEN 'CANCELLED'
                          WHEN sqlc.narg('failure')::text IS NOT NULL THEN 'FAILED'
                          WHEN @done::boolean THEN 'COMPLETED'
                          ELSE status END,
    failure_reason = sqlc.narg('failure')::text
WHERE id = @id AND runner = @runner AND status IN ('RUNNING', 'CANCELLING')
RETURNING status;

-- name: SQSMoveTaskTakeOverStale :many
-- The worker's take-over of up to @max_tasks tasks whose runner stopped
-- beating (its node went away), for @runner; a cancelled one just ends.
-- SKIP LOCKED: a task another node is taking over, or whose runner is
-- recording a step, is left to them, never waited for.
WITH stale AS (
    SELECT t.id FROM skipq.sqs_move_tasks t
    WHERE t.status IN ('RUNNING', 'CANCELLING') AND t.heartbeat_at < now() - make_interval(secs => @stale_seconds)
    ORDER BY t.id
    LIMIT @max_tasks
    FOR UPDATE SKIP LOCKED
)
UPDATE skipq.sqs_move_tasks t SET
    runner       = @runner,
    heartbeat_at = now(),
    status       = CASE WHEN t.status = 'CANCELLING' THEN 'CANCELLED' ELSE t.status END
FROM stale
WHERE t.id = stale.id
RETURNING t.*;

-- name: SQSMoveTaskList :many
-- The most recent tasks of a source queue.
SELECT * FROM skipq.sqs_move_tasks
WHERE source_queue_id = @source_queue_id
ORDER BY id DESC
LIMIT @max_tasks;

-- name: SQSMoveTaskCancel :one
-- Asks a running task to stop; its runner ends it after the step it is in.
UPDATE skipq.sqs_move_tasks t SET status = 'CANCELLING'
FROM skipq.queues q
WHERE t.id = @id AND q.id = t.source_queue_id AND q.tenant = @tenant AND t.status = 'RUNNING'
RETURNING t.*;

-- name: SQSMoveTaskGet :one
SELECT t.* FROM skipq.sqs_move_tasks t
JOIN skipq.queues q ON q.id = t.source_queue_id
WHERE t.id = @id AND q.tenant = @tenant;

-- name: SQSReceiveAttemptGet :one
-- A FIFO receive's attempt, if made in the last five minutes.
SELECT sequences, tokens FROM skipq.sqs_receive_attempts
WHERE queue_id = @queue_id AND attempt_id = @attempt_id AND created_at > now() - interval '5 minutes';

-- name: SQSReceiveAttemptPut :exec
-- Records what a FIFO receive handed out, and prunes up to 100 of the
-- queue's attempts older than five minutes.
WITH pruned AS (
    DELETE FROM skipq.sqs_receive_attempts a
    WHERE (a.queue_id, a.attempt_id) IN (
        SELECT o.queue_id, o.attempt_id FROM skipq.sqs_receive_attempts o
        WHERE o.queue_id = @queue_id AND o.created_at <= now() - interval '5 minutes'
        LIMIT 100)
)
INSERT INTO skipq.sqs_receive_attempts (queue_id, attempt_id, sequences, tokens)
VALUES (@queue_id, @attempt_id, @sequences::bigint[], @tokens::bytea[])
ON CONFLICT (queue_id, attempt_id) DO UPDATE SET
    created_at = now(), sequences = excluded.sequences, tokens = excluded.tokens;

-- name: SQSMessagesInFlight :many
-- The messages of a queue among @sequences that are in flight (the caller
-- compares their lease tokens). Each message by its address, found by
-- skipq.message_rows (a probe that only the primary key serves; the plan
-- settings turn sorts off), so that the address is the only condition a
-- plan can look up by. With `queue_id = @queue_id AND sequence = ANY(...)`,
-- a plan made on a drained table's statistics walked
-- messages_queue_sent_idx over all of the queue's messages, sequence being
-- its third column.
SELECT m.* FROM skipq.messages m
WHERE m.ctid = ANY(ARRAY(SELECT r.address
                         FROM skipq.message_rows(array_fill(@queue_id::bigint, ARRAY[cardinality(@sequences::bigint[])]),
                                                 @sequences::bigint[]) AS r(address, n)))
  AND m.visible_at > now()
  AND m.lease_token IS NOT NULL;
