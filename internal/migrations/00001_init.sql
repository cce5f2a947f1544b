-- +goose Up
-- skipq's whole state. Design notes (why each index exists) are inline; the
-- measurements behind them are in docs/DESIGN.md.

CREATE SCHEMA IF NOT EXISTS skipq;

-- A queue belongs to a tenant; (tenant, name) is the lookup key of every
-- request. Settings are the defaults applied to messages at send time.
CREATE TABLE skipq.queues (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant               text        NOT NULL,
    name                 text        NOT NULL,
    visibility_seconds   integer     NOT NULL DEFAULT 60,
    receive_wait_seconds integer     NOT NULL DEFAULT 1,
    delay_seconds        integer     NOT NULL DEFAULT 0,
    expiration_seconds   integer     NOT NULL DEFAULT 0,
    max_receive_count    integer     NOT NULL DEFAULT 0,
    dead_letter_queue    text        NOT NULL DEFAULT '',
    dedup_window_seconds integer     NOT NULL DEFAULT 300,
    created_at           timestamptz NOT NULL DEFAULT now(),
    -- Serves every (tenant, name) lookup and the prefix listing by name.
    CONSTRAINT queues_tenant_name_key UNIQUE (tenant, name)
);

-- One global sequence gives every message its `sequence`: increasing within a
-- queue in send order, with gaps, and no per-queue counter row that every
-- send would have to lock.
CREATE SEQUENCE skipq.message_sequence AS bigint;

-- Messages of every queue. There is deliberately NO foreign key to queues:
-- an FK makes every insert take a KEY SHARE lock on the queue row, which turns
-- into a MultiXact under concurrent sends. Queue deletion removes its
-- messages in the same transaction instead.
--
-- The claim path walks the primary key (queue_id, sequence) in order and
-- filters on visible_at. There is deliberately NO index on visible_at
-- (POSTGRES-QUEUE-FACTS: such an index collects dead entries at its head —
-- 2,439 buffers read to find nothing on an empty queue — and makes every
-- claim a non-HOT update). A claim changes only unindexed columns
-- (visible_at, receive_count, first_received_at, lease_token), so with
-- fillfactor 50 it is a HOT update that writes no index entry.
CREATE TABLE skipq.messages (
    queue_id          bigint      NOT NULL,
    sequence          bigint      NOT NULL DEFAULT nextval('skipq.message_sequence'),
    message_id        text        NOT NULL,
    client_id         text        NOT NULL DEFAULT '',
    metadata          text        NOT NULL DEFAULT '',
    body              bytea       NOT NULL DEFAULT '\x',
    -- true when the body was sent as base64 or bytea: it is returned as base64.
    body_binary       boolean     NOT NULL DEFAULT false,
    tags              jsonb       NOT NULL DEFAULT '{}',
    sent_at           timestamptz NOT NULL,
    -- When the message may next be delivered: delayedTo, then lease ends.
    visible_at        timestamptz NOT NULL,
    delayed_to        timestamptz,
    expires_at        timestamptz,
    receive_count     integer     NOT NULL DEFAULT 0,
    first_received_at timestamptz,
    max_receive_count integer     NOT NULL,
    dead_letter_queue text        NOT NULL DEFAULT '',
    re_routed_from    text,
    dead_lettered_at  timestamptz,
    -- 32 random bytes minted by each claim; the receipt handle carries them.
    -- NULL when the message has no live delivery.
    lease_token       bytea,
    -- Set only while the message is on its last allowed delivery: when that
    -- lease ends, the worker dead-letters it. Non-final claims leave it NULL,
    -- so they stay HOT although the column is indexed.
    final_lease_until timestamptz,
    PRIMARY KEY (queue_id, sequence)
) WITH (
    fillfactor = 50,
    -- Every message leaves about two dead tuples (the claimed version and the
    -- deleted row): vacuum a hot queue table often, not after 20 % of it died.
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_cost_delay = 0
);

-- messageId is unique within its queue: lookups by id (GET/DELETE one
-- message) and the uniqueness rule itself. Never updated by a claim.
CREATE UNIQUE INDEX messages_queue_message_id_key ON skipq.messages (queue_id, message_id);

-- The worker's expiry sweep: only messages that can expire are indexed.
CREATE INDEX messages_expires_at_idx ON skipq.messages (expires_at)
    WHERE expires_at IS NOT NULL;

-- The worker's sweep of last deliveries whose lease ran out.
CREATE INDEX messages_final_lease_until_idx ON skipq.messages (final_lease_until)
    WHERE final_lease_until IS NOT NULL;

-- Idempotency keys of client-given message ids. A key lives for the queue's
-- dedup window after the first send and for as long as its message is still
-- in the queue; the worker drops it after both have passed. `result` columns
-- answer a duplicate with the first send's result.
CREATE TABLE skipq.dedup_keys (
    queue_id     bigint      NOT NULL,
    message_id   text        NOT NULL,
    content_hash bytea       NOT NULL,
    sequence     bigint      NOT NULL,
    sent_at      timestamptz NOT NULL,
    delayed_to   timestamptz,
    expires_at   timestamptz,
    window_ends  timestamptz NOT NULL,
    PRIMARY KEY (queue_id, message_id)
);

-- The worker's sweep of old keys.
CREATE INDEX dedup_keys_window_ends_idx ON skipq.dedup_keys (window_ends);

-- A UUIDv7 (48-bit millisecond time, then strong randomness), for server
-- message ids minted in SQL (a moved message whose id is taken). Postgres 15
-- has no built-in v7.
-- +goose StatementBegin
CREATE FUNCTION skipq.uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;
-- +goose StatementEnd

-- +goose Down
DROP SCHEMA skipq CASCADE;
