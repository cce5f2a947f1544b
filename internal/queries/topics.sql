-- name: TopicCreate :one
-- A new topic; no row when one of the name exists (TopicUpdate then).
INSERT INTO skipq.topics (tenant, name, fifo, dedup_window_seconds, retain_seconds)
VALUES (@tenant, @name, @fifo, @dedup_window_seconds, @retain_seconds)
ON CONFLICT ON CONSTRAINT topics_tenant_name_key DO NOTHING
RETURNING id;

-- name: TopicUpdate :one
-- The settings a topic may change (fifo is fixed at creation).
UPDATE skipq.topics
SET dedup_window_seconds = coalesce(sqlc.narg('dedup_window_seconds')::integer, dedup_window_seconds),
    retain_seconds = coalesce(sqlc.narg('retain_seconds')::integer, retain_seconds),
    updated_at = now()
WHERE tenant = @tenant AND name = @name
RETURNING fifo;

-- name: TopicGet :one
-- A topic with its subscription count and counters: those the worker
-- folded in, plus the publishes' rows not yet folded.
SELECT t.id, t.name, t.fifo, t.dedup_window_seconds, t.retain_seconds, t.created_at, t.updated_at,
       (SELECT count(*) FROM skipq.topic_subscriptions s JOIN skipq.queues q ON q.id = s.queue_id
        WHERE s.topic_id = t.id)::integer AS subscriptions,
       (t.published + coalesce(c.published, 0))::bigint AS published,
       (t.delivered + coalesce(c.delivered, 0))::bigint AS delivered,
       (t.unrouted + coalesce(c.unrouted, 0))::bigint AS unrouted
FROM skipq.topics t
CROSS JOIN LATERAL (SELECT sum(x.published) AS published, sum(x.delivered) AS delivered,
                           sum(x.unrouted) AS unrouted
                    FROM skipq.topic_counts x WHERE x.topic_id = t.id) c
WHERE t.tenant = @tenant AND t.name = @name;

-- name: TopicList :many
-- Keyset pagination over the (tenant, name) unique index, as QueueList.
SELECT t.id, t.name, t.fifo, t.dedup_window_seconds, t.retain_seconds, t.created_at, t.updated_at,
       (SELECT count(*) FROM skipq.topic_subscriptions s JOIN skipq.queues q ON q.id = s.queue_id
        WHERE s.topic_id = t.id)::integer AS subscriptions,
       (t.published + coalesce(c.published, 0))::bigint AS published,
       (t.delivered + coalesce(c.delivered, 0))::bigint AS delivered,
       (t.unrouted + coalesce(c.unrouted, 0))::bigint AS unrouted
FROM skipq.topics t
CROSS JOIN LATERAL (SELECT sum(x.published) AS published, sum(x.delivered) AS delivered,
                           sum(x.unrouted) AS unrouted
                    FROM skipq.topic_counts x WHERE x.topic_id = t.id) c
WHERE t.tenant = @tenant AND t.name > @after::text
ORDER BY t.name
LIMIT @max_topics;

-- name: TopicSubscriptionList :many
-- A topic's subscriptions whose queue exists, by queue name, with the time
-- a subscription still replaying replays from.
SELECT q.name AS queue, s.filter, s.created_at, r.replay_from
FROM skipq.topic_subscriptions s JOIN skipq.queues q ON q.id = s.queue_id
LEFT JOIN skipq.topic_replays r ON r.topic_id = s.topic_id AND r.queue_id = s.queue_id
    AND r.created_at >= s.created_at
WHERE s.topic_id = @topic_id
ORDER BY q.name;

-- name: TopicSubscribe :one
-- Subscribes (a new subscription with replay_from replays the topic's
-- retained messages first), or changes a subscription's filter.
SELECT skipq.topic_subscribe_replay(@tenant, @topic, @queue, sqlc.narg('filter')::jsonb, @max_subscriptions,
                                    sqlc.narg('replay_from')::timestamptz)::text;

-- name: TopicRetentionPrune :one
-- Removes up to max_messages retained messages whose retention ended.
SELECT skipq.topic_retention_prune(@now::timestamptz, @max_messages::integer)::integer;

-- name: TopicUnsubscribe :one
-- Ends a subscription, or (queue NULL) deletes the topic; whether there
-- was one.
SELECT skipq.topic_unsubscribe(@tenant, @topic, sqlc.narg('queue')::text)::boolean;

-- name: TopicBodies :many
-- The stored bodies of topic copies, by the ids their tags name.
SELECT id, body FROM skipq.topic_bodies WHERE id = ANY(@ids::bigint[]);

-- name: TopicMessageAcross :many
-- One published message in each group of a topic: its copy in the group's
-- queue (its state there), else its copy the group has yet to make
-- (skipq.topic_pending: available), else its dead letter from that queue,
-- else nothing (gone).
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS now)
SELECT q.name AS queue,
       CASE WHEN m.queue_id IS NOT NULL
            THEN skipq.message_state(m.visible_at, m.receive_count, m.max_receive_count, m.lease_token, t.now)
            WHEN EXISTS (SELECT 1 FROM skipq.topic_bodies b JOIN skipq.topic_pending p ON b.id = ANY(p.body_ids)
                         WHERE b.topic_id = tp.id AND b.message_id = @message_id AND p.queue_id = q.id)
            THEN 'available'
            WHEN d.dead THEN 'dead_lettered' ELSE 'gone' END::text AS state,
       coalesce(m.receive_count, 0)::integer AS receive_count,
       m.visible_at
FROM skipq.topics tp
CROSS JOIN t
JOIN skipq.topic_subscriptions s ON s.topic_id = tp.id
JOIN skipq.queues q ON q.id = s.queue_id
LEFT JOIN skipq.messages m ON m.queue_id = q.id AND m.message_id = @message_id
    AND (m.expires_at IS NULL OR m.expires_at > t.now)
CROSS JOIN LATERAL (SELECT EXISTS (
    SELECT 1 FROM skipq.messages x JOIN skipq.queues xq ON xq.id = x.queue_id
    WHERE x.message_id = @message_id AND xq.tenant = tp.tenant
      AND x.re_routed_from = q.name AND x.dead_lettered_at IS NOT NULL) AS dead) d
WHERE tp.tenant = @tenant AND tp.name = @topic
ORDER BY q.name;

-- name: TopicUpkeep :one
SELECT skipq.topic_upkeep(@after, @max_bodies)::bigint;

-- name: TopicCopiesReady :many
-- Worker: makes ready messages of the topic copies their groups have yet to
-- make, of up to @max_rows pending rows published @pending_seconds or more
-- before now (skipq.topic_copies_ready; @now NULL: the database's clock,
-- the one publishes date their rows by); each queue's count, for its
-- wake-up.
SELECT r.queue_id::bigint AS queue_id, r.readied::integer AS readied
FROM skipq.topic_copies_ready(sqlc.narg('now')::timestamptz,
    coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @pending_seconds::float8),
    @max_rows) r;

-- name: TopicPendingDeleteByQueue :one
-- Purge and queue deletion, first: the topic copies the queue has yet to
-- make (skipq.topic_pending); returns how many. A statement of its own,
-- before MessageDeleteByQueue's: a claim that took pending copies and
-- made them in a transaction this one waits for has its copies seen by
-- that later statement's snapshot, not lost between the two.
WITH pending AS (
    DELETE FROM skipq.topic_pending p WHERE p.queue_id = @queue_id
    RETURNING cardinality(p.body_ids) AS copies
)
SELECT coalesce(sum(p.copies), 0)::bigint AS deleted FROM pending p;
