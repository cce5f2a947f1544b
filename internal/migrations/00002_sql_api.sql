-- +goose Up
-- The SQL API (SPEC §6): applications in the same database enqueue inside
-- their own transactions. Rolled back means no message; committed means
-- visible, and the NOTIFY issued here wakes waiting HTTP receivers on commit.
-- Validation matches the HTTP API; violations raise SQLSTATE 22023.
--
-- Server limits default to SPEC §2's; a deployment that changes SKIPQ_MAX_*
-- sets the same values for SQL with, e.g.,
--   ALTER DATABASE app SET skipq.max_delay_seconds = '600';

-- +goose StatementBegin
CREATE FUNCTION skipq.limit_setting(name text, fallback integer) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('skipq.' || name, true), '')::integer, fallback)
$$;
-- +goose StatementEnd

-- The idempotency content hash; service/send.go computes the same bytes:
-- sha256 over length-prefixed body, binary flag, metadata, clientId, then
-- each tag (key, value) in byte order of the keys.
-- +goose StatementBegin
CREATE FUNCTION skipq.content_hash(body bytea, body_binary boolean, metadata text, client_id text, tags jsonb)
RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT sha256(
        int8send(length(body)) || body ||
        int8send(1) || CASE WHEN body_binary THEN '\x01'::bytea ELSE '\x00'::bytea END ||
        int8send(octet_length(metadata)) || convert_to(metadata, 'UTF8') ||
        int8send(octet_length(client_id)) || convert_to(client_id, 'UTF8') ||
        coalesce((SELECT string_agg(
                      int8send(octet_length(t.key)) || convert_to(t.key, 'UTF8') ||
                      int8send(octet_length(t.value)) || convert_to(t.value, 'UTF8'),
                      ''::bytea ORDER BY t.key COLLATE "C")
                  FROM jsonb_each_text(tags) t), ''::bytea))
$$;
-- +goose StatementEnd

-- skipq.check raises invalid_parameter_value (22023) unless ok.
-- +goose StatementBegin
CREATE FUNCTION skipq.check(ok boolean, message text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT coalesce(ok, false) THEN
        RAISE EXCEPTION 'skipq: %', message USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.check_queue_name(field text, name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM skipq.check(name IS NOT NULL AND octet_length(name) BETWEEN 1 AND 256,
                        field || ' must be 1 to 256 bytes');
    PERFORM skipq.check(name !~ '[[:space:][:cntrl:]*>/]',
                        field || ' must not contain whitespace, control characters, "*", ">" or "/"');
    PERFORM skipq.check(right(name, 1) <> '.', field || ' must not end with "."');
END $$;
-- +goose StatementEnd

-- skipq.enqueue is the one implementation behind send and send_batch: it
-- validates, creates the queue if missing, resolves policies against the
-- queue's defaults, applies idempotency keys and notifies waiting
-- receivers. One row per body, in order.
-- +goose StatementBegin
CREATE FUNCTION skipq.enqueue(
    p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb,
    p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer,
    p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text)
RETURNS TABLE (message_id text, sequence bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE AS $$
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

-- skipq.send: one message. body is text, bytea (returned as base64 over
-- HTTP) or jsonb (stored as its text).
-- +goose StatementBegin
CREATE FUNCTION skipq.send(
    queue text, body text,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[convert_to(body, 'UTF8')], false, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send(
    queue text, body bytea,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[body], true, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send(
    queue text, body jsonb,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM skipq.send(queue, body::text, metadata, tags, delay_seconds, expiration_seconds,
                             max_receive_count, dead_letter_queue, message_id, client_id, tenant)
$$;
-- +goose StatementEnd

-- skipq.send_batch: many bodies with shared options, one message each, in
-- order; message_ids (optional) gives each its idempotency key.
-- +goose StatementBegin
CREATE FUNCTION skipq.send_batch(
    queue text, bodies text[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY(SELECT convert_to(b, 'UTF8') FROM unnest(bodies) WITH ORDINALITY AS u(b, n) ORDER BY n),
        false, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send_batch(
    queue text, bodies bytea[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, bodies, true, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send_batch(
    queue text, bodies jsonb[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM skipq.send_batch(queue, bodies::text[], metadata, tags, delay_seconds,
                                   expiration_seconds, max_receive_count, dead_letter_queue,
                                   message_ids, client_id, tenant)
$$;
-- +goose StatementEnd

-- skipq_producer may enqueue and nothing else: the send functions run with
-- their owner's rights (SECURITY DEFINER, pinned search_path), and the role
-- gets no access to the tables themselves.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'skipq_producer') THEN
        CREATE ROLE skipq_producer NOLOGIN;
    END IF;
END $$;
-- +goose StatementEnd
ALTER FUNCTION skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC;
GRANT USAGE ON SCHEMA skipq TO skipq_producer;
GRANT EXECUTE ON FUNCTION
    skipq.send(text, text, text, jsonb, integer, integer, integer, text, text, text, text),
    skipq.send(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text),
    skipq.send(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text),
    skipq.send_batch(text, text[], text, jsonb, integer, integer, integer, text, text[], text, text),
    skipq.send_batch(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text),
    skipq.send_batch(text, jsonb[], text, jsonb, integer, integer, integer, text, text[], text, text),
    skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text)
TO skipq_producer;

-- +goose Down
DROP FUNCTION skipq.send_batch(text, jsonb[], text, jsonb, integer, integer, integer, text, text[], text, text);
DROP FUNCTION skipq.send_batch(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text);
DROP FUNCTION skipq.send_batch(text, text[], text, jsonb, integer, integer, integer, text, text[], text, text);
DROP FUNCTION skipq.send(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text);
DROP FUNCTION skipq.send(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text);
DROP FUNCTION skipq.send(text, text, text, jsonb, integer, integer, integer, text, text, text, text);
DROP FUNCTION skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text);
DROP FUNCTION skipq.check_queue_name(text, text);
DROP FUNCTION skipq.check(boolean, text);
DROP FUNCTION skipq.content_hash(bytea, boolean, text, text, jsonb);
DROP FUNCTION skipq.limit_setting(text, integer);
