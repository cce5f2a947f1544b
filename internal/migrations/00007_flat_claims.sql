-- +goose Up
-- Flat claims (docs/DESIGN.md, "The claim"). A claim used to walk a queue's
-- primary key from its head and step over every delayed or in-flight
-- message before the first available one: 100,000 messages in flight made
-- each receive read ~3,000 buffers. Now a claim walks skipq.ready, which
-- holds exactly the messages that may be claimed; delayed and leased
-- messages wait in skipq.timers until the worker readies them (or, at the
-- end of a last allowed lease, dead-letters them).
--
-- Why a separate table and not a partial index on messages: a claim must
-- take the message off the claim path, and changing a column that an index
-- (or an index predicate) names makes the update non-HOT -- a new entry in
-- every index of the message, per claim. The messages row is still updated
-- only in unindexed columns, so claims stay HOT; what moves is a 16-byte row.

-- One row per message a claim may take now, in the order claims take them.
-- Invariant, kept by every statement under the message's row lock (taken
-- before the ready row is touched, so no two statements wait on each other
-- in opposite orders): messages.ready is true exactly when this table has a
-- row for the message.
CREATE TABLE skipq.ready (
    queue_id bigint NOT NULL,
    sequence bigint NOT NULL,
    PRIMARY KEY (queue_id, sequence)
) WITH (
    -- Every claim deletes rows here: vacuum it early and often (the
    -- worker's vacuum also covers it).
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_cost_delay = 0,
    -- The table empties and refills all the time: truncating its empty tail
    -- would take an ACCESS EXCLUSIVE lock that stalls every claim (measured
    -- as Timeout:VacuumTruncate waits under load), to give back pages that
    -- the next sends need again.
    vacuum_truncate = false
);

-- When a message's state changes with time: its delay ends, or its lease
-- does. A timer is a hint, never the truth: the worker re-reads the message
-- when the timer is due and acts only if the message is still waiting for
-- that moment (an acked message or an extended lease makes an old timer a
-- no-op). So a claim inserts one and nothing ever has to find and delete it.
CREATE TABLE skipq.timers (
    due_at   timestamptz NOT NULL,
    queue_id bigint      NOT NULL,
    sequence bigint      NOT NULL
) WITH (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_cost_delay = 0,
    -- The table empties and refills all the time: truncating its empty tail
    -- would take an ACCESS EXCLUSIVE lock that stalls every claim (measured
    -- as Timeout:VacuumTruncate waits under load), to give back pages that
    -- the next sends need again.
    vacuum_truncate = false
);

-- The worker takes due timers oldest first.
CREATE INDEX timers_due_at_idx ON skipq.timers (due_at);

-- Not indexed, so claims that clear it stay HOT.
ALTER TABLE skipq.messages ADD COLUMN ready boolean NOT NULL DEFAULT false;

-- Existing messages: the available ones are ready, every other one gets a
-- timer at its visibility time (a delay's end, a lease's end).
UPDATE skipq.messages SET ready = true
WHERE visible_at <= now() AND receive_count < max_receive_count;
INSERT INTO skipq.ready (queue_id, sequence)
SELECT queue_id, sequence FROM skipq.messages WHERE ready;
INSERT INTO skipq.timers (due_at, queue_id, sequence)
SELECT visible_at, queue_id, sequence FROM skipq.messages WHERE NOT ready;

-- The SQL send (migrations 00002, 00006) as before, plus: a message without
-- a delay is inserted ready, with its ready row, and a delayed one with a
-- timer at its delay's end; and a message cannot name its own queue as its
-- dead-letter queue (the HTTP API's rule too). Owner, SECURITY DEFINER
-- and the pinned search_path are restated: CREATE OR REPLACE resets them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.enqueue(
    p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb,
    p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer,
    p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text)
RETURNS TABLE (message_id text, sequence bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q            skipq.queues;
    v_now        timestamptz := now();
    v_delay      integer;
    v_expiration integer;
    v_max        integer;
    v_dlq        text;
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    v_max_bytes  integer := skipq.limit_setting('max_message_bytes', 1048576);
    v_id         text;
    v_hash       bytea;
    v_key        skipq.dedup_keys;
    v_seq        bigint;
    v_fresh      integer := 0;
    i            integer;
    t            record;
BEGIN
    PERFORM skipq.check(p_tenant IS NOT NULL AND p_tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue', p_queue);
    PERFORM skipq.check(coalesce(cardinality(p_bodies), 0) BETWEEN 1 AND 1000, 'a batch holds 1 to 1000 messages');
    PERFORM skipq.check(jsonb_typeof(v_tags) = 'object', 'tags must be a JSON object of strings');
    PERFORM skipq.check((SELECT count(*) FROM jsonb_object_keys(v_tags)) <= 32, 'tags: at most 32');
    FOR t IN SELECT key, value FROM jsonb_each(v_tags) LOOP
        PERFORM skipq.check(t.key ~ '^[A-Za-z0-9_.-]{1,64}$', 'tag key ' || quote_literal(t.key) || ' must match ^[A-Za-z0-9_.-]{1,64}$');
        PERFORM skipq.check(left(t.key, 6) <> 'skipq.', 'tag keys must not start with "skipq."');
        PERFORM skipq.check(jsonb_typeof(t.value) = 'string', 'tag ' || quote_literal(t.key) || ' must be a string');
        PERFORM skipq.check(octet_length(t.value #>> '{}') <= 1024, 'tag ' || quote_literal(t.key) || ': values are at most 1024 bytes');
    END LOOP;
    PERFORM skipq.check(p_delay_seconds IS NULL OR p_delay_seconds BETWEEN 0 AND skipq.limit_setting('max_delay_seconds', 43200),
                        'delay_seconds is out of range');
    PERFORM skipq.check(p_expiration_seconds IS NULL OR p_expiration_seconds BETWEEN 0 AND skipq.limit_setting('max_expiration_seconds', 43200),
                        'expiration_seconds is out of range');
    PERFORM skipq.check(p_max_receive_count IS NULL OR p_max_receive_count BETWEEN 0 AND skipq.limit_setting('max_receive_count', 1024),
                        'max_receive_count is out of range');
    IF p_dead_letter_queue IS NOT NULL AND p_dead_letter_queue <> '' THEN
        PERFORM skipq.check_queue_name('dead_letter_queue', p_dead_letter_queue);
        -- Its messages would come back with a fresh receive count forever.
        PERFORM skipq.check(p_dead_letter_queue <> p_queue, 'dead_letter_queue must not be the queue itself');
    END IF;
    PERFORM skipq.check(octet_length(v_client) <= 256, 'client_id must be at most 256 bytes');
    PERFORM skipq.check(p_message_ids IS NULL OR cardinality(p_message_ids) = cardinality(p_bodies),
                        'message_ids must have one id per body');
    FOR i IN 1 .. cardinality(p_bodies) LOOP
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) > 0 OR v_metadata <> '', 'body or metadata must be non-empty');
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) + octet_length(v_metadata) <= v_max_bytes,
                            'body and metadata together exceed ' || v_max_bytes || ' bytes');
        PERFORM skipq.check(p_message_ids IS NULL OR p_message_ids[i] IS NULL OR p_message_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'message_id must match ^[A-Za-z0-9._:-]{1,128}$');
    END LOOP;

    INSERT INTO skipq.queues (tenant, name) VALUES (p_tenant, p_queue) ON CONFLICT DO NOTHING;
    SELECT * INTO STRICT q FROM skipq.queues WHERE tenant = p_tenant AND name = p_queue;

    v_delay      := coalesce(p_delay_seconds, q.delay_seconds);
    v_expiration := coalesce(p_expiration_seconds, q.expiration_seconds);
    v_max        := CASE WHEN coalesce(p_max_receive_count, 0) > 0 THEN p_max_receive_count
                         WHEN q.max_receive_count > 0 THEN q.max_receive_count
                         ELSE skipq.limit_setting('max_receive_count', 1024) END;
    v_dlq        := coalesce(p_dead_letter_queue, q.dead_letter_queue);

    FOR i IN 1 .. cardinality(p_bodies) LOOP
        v_id := CASE WHEN p_message_ids IS NULL THEN NULL ELSE p_message_ids[i] END;
        IF v_id IS NOT NULL THEN
            v_hash := skipq.content_hash(coalesce(p_bodies[i], '\x'), p_body_binary, v_metadata, v_client, v_tags);
            -- Serialize senders of the same new id (the HTTP path relies on
            -- the unique index and a retry; a function cannot retry).
            PERFORM pg_advisory_xact_lock(hashtextextended(q.id || '/' || v_id, 0));
            SELECT k.* INTO v_key FROM skipq.dedup_keys k
            WHERE k.queue_id = q.id AND k.message_id = v_id
              AND (k.window_ends > v_now OR EXISTS (
                  SELECT 1 FROM skipq.messages m WHERE m.queue_id = k.queue_id AND m.message_id = k.message_id));
            IF FOUND THEN
                PERFORM skipq.check(v_key.content_hash = v_hash,
                    'idempotency conflict: message_id ' || quote_literal(v_id) || ' was already sent with different content');
                message_id := v_key.message_id; sequence := v_key.sequence; duplicate := true;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        INSERT INTO skipq.messages AS m (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready)
        VALUES (
            q.id, coalesce(v_id, skipq.uuid_v7()::text), v_client, v_metadata, coalesce(p_bodies[i], '\x'),
            p_body_binary, v_tags, v_now,
            v_now + make_interval(secs => v_delay),
            CASE WHEN v_delay > 0 THEN v_now + make_interval(secs => v_delay) END,
            CASE WHEN v_expiration > 0 THEN v_now + make_interval(secs => v_delay + v_expiration) END,
            v_max, v_dlq, v_delay = 0)
        RETURNING m.message_id, m.sequence INTO message_id, v_seq;
        IF v_delay = 0 THEN
            INSERT INTO skipq.ready (queue_id, sequence) VALUES (q.id, v_seq);
        ELSE
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            VALUES (v_now + make_interval(secs => v_delay), q.id, v_seq);
        END IF;
        sequence := v_seq;
        duplicate := false;
        IF v_id IS NOT NULL THEN
            INSERT INTO skipq.dedup_keys AS k (queue_id, message_id, content_hash, sequence, sent_at,
                                               delayed_to, expires_at, window_ends)
            SELECT m.queue_id, m.message_id, v_hash, m.sequence, m.sent_at, m.delayed_to, m.expires_at,
                   m.sent_at + make_interval(secs => q.dedup_window_seconds)
            FROM skipq.messages m WHERE m.queue_id = q.id AND m.sequence = v_seq
            ON CONFLICT ON CONSTRAINT dedup_keys_pkey DO UPDATE SET
                content_hash = excluded.content_hash, sequence = excluded.sequence,
                sent_at = excluded.sent_at, delayed_to = excluded.delayed_to,
                expires_at = excluded.expires_at, window_ends = excluded.window_ends;
        END IF;
        IF v_delay = 0 THEN
            v_fresh := v_fresh + 1;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- One notification per call, delivered at commit ("sql" is never a
    -- node id, so every node wakes its waiters).
    IF v_fresh > 0 THEN
        PERFORM pg_notify('skipq_wake', 'sql ' || q.id || ' ' || v_fresh);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION
    skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text)
    FROM PUBLIC;

-- The messageId index, partial in name only (message_id is NOT NULL, so it
-- still covers every message and enforces uniqueness): a predicate makes the
-- planner consider the index only for statements that name message_id. A
-- claim or a settle probes a message by its whole primary key; with
-- statistics taken while the table was nearly empty, the planner rated a
-- full scan of this index ("queue_id" is its second column) as cheap as that
-- probe and picked it under generic plans (600 ms claims under load).
DROP INDEX skipq.messages_message_id_queue_key;
CREATE UNIQUE INDEX messages_message_id_queue_key ON skipq.messages (message_id, queue_id)
    WHERE message_id IS NOT NULL;

-- Timers replace the sweep of last deliveries whose lease ran out.
DROP INDEX skipq.messages_final_lease_until_idx;
ALTER TABLE skipq.messages DROP COLUMN final_lease_until;

-- +goose Down
DROP INDEX skipq.messages_message_id_queue_key;
CREATE UNIQUE INDEX messages_message_id_queue_key ON skipq.messages (message_id, queue_id);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.enqueue(
    p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb,
    p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer,
    p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text)
RETURNS TABLE (message_id text, sequence bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q            skipq.queues;
    v_now        timestamptz := now();
    v_delay      integer;
    v_expiration integer;
    v_max        integer;
    v_dlq        text;
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    v_max_bytes  integer := skipq.limit_setting('max_message_bytes', 1048576);
    v_id         text;
    v_hash       bytea;
    v_key        skipq.dedup_keys;
    v_seq        bigint;
    v_fresh      integer := 0;
    i            integer;
    t            record;
BEGIN
    PERFORM skipq.check(p_tenant IS NOT NULL AND p_tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue', p_queue);
    PERFORM skipq.check(coalesce(cardinality(p_bodies), 0) BETWEEN 1 AND 1000, 'a batch holds 1 to 1000 messages');
    PERFORM skipq.check(jsonb_typeof(v_tags) = 'object', 'tags must be a JSON object of strings');
    PERFORM skipq.check((SELECT count(*) FROM jsonb_object_keys(v_tags)) <= 32, 'tags: at most 32');
    FOR t IN SELECT key, value FROM jsonb_each(v_tags) LOOP
        PERFORM skipq.check(t.key ~ '^[A-Za-z0-9_.-]{1,64}$', 'tag key ' || quote_literal(t.key) || ' must match ^[A-Za-z0-9_.-]{1,64}$');
        PERFORM skipq.check(left(t.key, 6) <> 'skipq.', 'tag keys must not start with "skipq."');
        PERFORM skipq.check(jsonb_typeof(t.value) = 'string', 'tag ' || quote_literal(t.key) || ' must be a string');
        PERFORM skipq.check(octet_length(t.value #>> '{}') <= 1024, 'tag ' || quote_literal(t.key) || ': values are at most 1024 bytes');
    END LOOP;
    PERFORM skipq.check(p_delay_seconds IS NULL OR p_delay_seconds BETWEEN 0 AND skipq.limit_setting('max_delay_seconds', 43200),
                        'delay_seconds is out of range');
    PERFORM skipq.check(p_expiration_seconds IS NULL OR p_expiration_seconds BETWEEN 0 AND skipq.limit_setting('max_expiration_seconds', 43200),
                        'expiration_seconds is out of range');
    PERFORM skipq.check(p_max_receive_count IS NULL OR p_max_receive_count BETWEEN 0 AND skipq.limit_setting('max_receive_count', 1024),
                        'max_receive_count is out of range');
    IF p_dead_letter_queue IS NOT NULL AND p_dead_letter_queue <> '' THEN
        PERFORM skipq.check_queue_name('dead_letter_queue', p_dead_letter_queue);
    END IF;
    PERFORM skipq.check(octet_length(v_client) <= 256, 'client_id must be at most 256 bytes');
    PERFORM skipq.check(p_message_ids IS NULL OR cardinality(p_message_ids) = cardinality(p_bodies),
                        'message_ids must have one id per body');
    FOR i IN 1 .. cardinality(p_bodies) LOOP
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) > 0 OR v_metadata <> '', 'body or metadata must be non-empty');
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) + octet_length(v_metadata) <= v_max_bytes,
                            'body and metadata together exceed ' || v_max_bytes || ' bytes');
        PERFORM skipq.check(p_message_ids IS NULL OR p_message_ids[i] IS NULL OR p_message_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'message_id must match ^[A-Za-z0-9._:-]{1,128}$');
    END LOOP;

    INSERT INTO skipq.queues (tenant, name) VALUES (p_tenant, p_queue) ON CONFLICT DO NOTHING;
    SELECT * INTO STRICT q FROM skipq.queues WHERE tenant = p_tenant AND name = p_queue;

    v_delay      := coalesce(p_delay_seconds, q.delay_seconds);
    v_expiration := coalesce(p_expiration_seconds, q.expiration_seconds);
    v_max        := CASE WHEN coalesce(p_max_receive_count, 0) > 0 THEN p_max_receive_count
                         WHEN q.max_receive_count > 0 THEN q.max_receive_count
                         ELSE skipq.limit_setting('max_receive_count', 1024) END;
    v_dlq        := coalesce(p_dead_letter_queue, q.dead_letter_queue);

    FOR i IN 1 .. cardinality(p_bodies) LOOP
        v_id := CASE WHEN p_message_ids IS NULL THEN NULL ELSE p_message_ids[i] END;
        IF v_id IS NOT NULL THEN
            v_hash := skipq.content_hash(coalesce(p_bodies[i], '\x'), p_body_binary, v_metadata, v_client, v_tags);
            -- Serialize senders of the same new id (the HTTP path relies on
            -- the unique index and a retry; a function cannot retry).
            PERFORM pg_advisory_xact_lock(hashtextextended(q.id || '/' || v_id, 0));
            SELECT k.* INTO v_key FROM skipq.dedup_keys k
            WHERE k.queue_id = q.id AND k.message_id = v_id
              AND (k.window_ends > v_now OR EXISTS (
                  SELECT 1 FROM skipq.messages m WHERE m.queue_id = k.queue_id AND m.message_id = k.message_id));
            IF FOUND THEN
                PERFORM skipq.check(v_key.content_hash = v_hash,
                    'idempotency conflict: message_id ' || quote_literal(v_id) || ' was already sent with different content');
                message_id := v_key.message_id; sequence := v_key.sequence; duplicate := true;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        INSERT INTO skipq.messages AS m (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue)
        VALUES (
            q.id, coalesce(v_id, skipq.uuid_v7()::text), v_client, v_metadata, coalesce(p_bodies[i], '\x'),
            p_body_binary, v_tags, v_now,
            v_now + make_interval(secs => v_delay),
            CASE WHEN v_delay > 0 THEN v_now + make_interval(secs => v_delay) END,
            CASE WHEN v_expiration > 0 THEN v_now + make_interval(secs => v_delay + v_expiration) END,
            v_max, v_dlq)
        RETURNING m.message_id, m.sequence INTO message_id, v_seq;
        sequence := v_seq;
        duplicate := false;
        IF v_id IS NOT NULL THEN
            INSERT INTO skipq.dedup_keys AS k (queue_id, message_id, content_hash, sequence, sent_at,
                                               delayed_to, expires_at, window_ends)
            SELECT m.queue_id, m.message_id, v_hash, m.sequence, m.sent_at, m.delayed_to, m.expires_at,
                   m.sent_at + make_interval(secs => q.dedup_window_seconds)
            FROM skipq.messages m WHERE m.queue_id = q.id AND m.sequence = v_seq
            ON CONFLICT ON CONSTRAINT dedup_keys_pkey DO UPDATE SET
                content_hash = excluded.content_hash, sequence = excluded.sequence,
                sent_at = excluded.sent_at, delayed_to = excluded.delayed_to,
                expires_at = excluded.expires_at, window_ends = excluded.window_ends;
        END IF;
        IF v_delay = 0 THEN
            v_fresh := v_fresh + 1;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- One notification per call, delivered at commit ("sql" is never a
    -- node id, so every node wakes its waiters).
    IF v_fresh > 0 THEN
        PERFORM pg_notify('skipq_wake', 'sql ' || q.id || ' ' || v_fresh);
    END IF;
END $$;
-- +goose StatementEnd
ALTER TABLE skipq.messages ADD COLUMN final_lease_until timestamptz;
UPDATE skipq.messages SET final_lease_until = visible_at
WHERE lease_token IS NOT NULL AND receive_count >= max_receive_count;
CREATE INDEX messages_final_lease_until_idx ON skipq.messages (final_lease_until)
    WHERE final_lease_until IS NOT NULL;
ALTER TABLE skipq.messages DROP COLUMN ready;
DROP TABLE skipq.timers;
DROP TABLE skipq.ready;
