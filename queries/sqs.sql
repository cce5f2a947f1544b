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
-- again at once, their handles kept (SPEC §11.16 D4): the claim left them
-- unready until their (immediate) lease-end timer fired, up to a worker
-- tick later. A message on its last allowed delivery stays with the
-- worker, which dead-letters it, as after any lease. Message first, then
-- its ready row: the lock order of every statement.
WITH readied AS (
    UPDATE skipq.messages m SET ready = true
    FROM (SELECT unnest(@queue_ids::bigint[]) AS queue_id, unnest(@sequences::bigint[]) AS sequence,
            unnest(@tokens::bytea[]) AS token) k
    WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
      AND NOT m.ready AND m.receive_count < m.max_receive_count
    RETURNING m.queue_id, m.sequence
)
INSERT INTO skipq.ready (queue_id, sequence)
SELECT r.queue_id, r.sequence FROM readied r
ON CONFLICT DO NOTHING
RETURNING queue_id;
