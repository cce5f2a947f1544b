-- +goose Up
-- The SQL send takes groups (SPEC §12): skipq.send(..., group_id => 'g'),
-- skipq.send_batch(..., group_ids => ARRAY[...]), one group per body. The
-- same rules as over HTTP: required on a FIFO queue, refused on a standard
-- one, ^[A-Za-z0-9._:-]{1,128}$, at most 64 groups in a batch; a send with
-- groups creates a missing queue as FIFO. A new argument is a new
-- signature, so the old functions go (the jsonb forms first: they call the
-- others).
DROP FUNCTION skipq.send_batch(text, jsonb[], text, jsonb, integer, integer, integer, text, text[], text, text);
DROP FUNCTION skipq.send_batch(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text);
DROP FUNCTION skipq.send_batch(text, text[], text, jsonb, integer, integer, integer, text, text[], text, text);
DROP FUNCTION skipq.send(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text);
DROP FUNCTION skipq.send(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text);
DROP FUNCTION skipq.send(text, text, text, jsonb, integer, integer, integer, text, text, text, text);
DROP FUNCTION skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text);

-- +goose StatementBegin
CREATE FUNCTION skipq.enqueue(
    p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb,
    p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer,
    p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[])
RETURNS TABLE (message_id text, sequence bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    v_max_bytes  integer := skipq.limit_setting('max_message_bytes', 1048576);
    n            integer := coalesce(cardinality(p_bodies), 0);
    v_data       bytea;
    v_offsets    integer[];
    v_lengths    integer[];
    v_queue_id   bigint;
    v_fresh      integer := 0;
    i            integer;
    t            record;
    r            record;
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
    PERFORM skipq.check(p_group_ids IS NULL OR cardinality(p_group_ids) = cardinality(p_bodies),
                        'group_ids must have one group per body');
    PERFORM skipq.check(p_group_ids IS NULL OR (SELECT count(DISTINCT g) FROM unnest(p_group_ids) g) <= 64,
                        'a batch names at most 64 distinct group ids');
    FOR i IN 1 .. cardinality(p_bodies) LOOP
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) > 0 OR v_metadata <> '', 'body or metadata must be non-empty');
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) + octet_length(v_metadata) <= v_max_bytes,
                            'body and metadata together exceed ' || v_max_bytes || ' bytes');
        PERFORM skipq.check(p_message_ids IS NULL OR p_message_ids[i] IS NULL OR p_message_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'message_id must match ^[A-Za-z0-9._:-]{1,128}$');
        PERFORM skipq.check(p_group_ids IS NULL OR p_group_ids[i] IS NULL OR p_group_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'group_id must match ^[A-Za-z0-9._:-]{1,128}$');
    END LOOP;

    -- A queue created by a send with groups is FIFO (SPEC §12).
    INSERT INTO skipq.queues (tenant, name, fifo)
    SELECT p_tenant, p_queue, p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL)
    WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = p_tenant AND e.name = p_queue)
    ON CONFLICT DO NOTHING;

    SELECT coalesce(string_agg(coalesce(u.b, '\x'::bytea), '\x'::bytea ORDER BY u.x), '\x'::bytea),
           array_agg(u.start::integer ORDER BY u.x), array_agg(u.len ORDER BY u.x)
    INTO v_data, v_offsets, v_lengths
    FROM (SELECT b, x, coalesce(length(b), 0) AS len,
                 1 + sum(coalesce(length(b), 0)) OVER (ORDER BY x) - coalesce(length(b), 0) AS start
          FROM unnest(p_bodies) WITH ORDINALITY AS u(b, x)) u;

    FOR r IN
        SELECT * FROM skipq.message_insert(
            p_tenant, p_queue, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT coalesce(p_message_ids[x], skipq.uuid_v7()::text)
                  FROM generate_series(1, n) x ORDER BY x),
            ARRAY(SELECT p_message_ids[x] IS NOT NULL FROM generate_series(1, n) x ORDER BY x),
            array_fill(v_client, ARRAY[n]), array_fill(v_metadata, ARRAY[n]),
            array_fill(p_body_binary, ARRAY[n]), array_fill(v_tags::text, ARRAY[n]),
            array_fill(coalesce(p_delay_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_expiration_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_max_receive_count, 0), ARRAY[n]),
            array_fill(coalesce(p_dead_letter_queue, ''), ARRAY[n]),
            array_fill(p_dead_letter_queue IS NOT NULL, ARRAY[n]),
            v_offsets, v_lengths, v_data,
            CASE WHEN p_group_ids IS NULL THEN NULL
                 ELSE ARRAY(SELECT p_group_ids[x] FROM generate_series(1, n) x ORDER BY x) END) s
        ORDER BY s.pos
    LOOP
        PERFORM skipq.check(r.outcome <> 'group_required',
            'queue ' || quote_literal(p_queue) || ' is FIFO: every message needs a group_id');
        PERFORM skipq.check(r.outcome <> 'group_refused',
            'queue ' || quote_literal(p_queue) || ' is not FIFO: group_id is not allowed');
        PERFORM skipq.check(r.outcome <> 'conflict',
            'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already sent with different content');
        message_id := r.message_id; sequence := r.sequence; duplicate := r.outcome = 'duplicate';
        v_queue_id := r.queue_id;
        IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
            v_fresh := v_fresh + 1;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- One notification per call, delivered at commit ("sql" is never a
    -- node id, so every node wakes its waiters).
    IF v_fresh > 0 THEN
        PERFORM skipq.wake('sql', ARRAY[v_queue_id], ARRAY[v_fresh]);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION
    skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text, text[])
    FROM PUBLIC;
-- +goose StatementBegin
CREATE FUNCTION skipq.send(
    queue text, body text,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default', group_id text DEFAULT NULL)
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[pg_catalog.convert_to(body, 'UTF8')], false, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant,
        CASE WHEN group_id IS NULL THEN NULL ELSE ARRAY[group_id] END) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send(
    queue text, body bytea,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default', group_id text DEFAULT NULL)
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[body], true, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant,
        CASE WHEN group_id IS NULL THEN NULL ELSE ARRAY[group_id] END) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send(
    queue text, body jsonb,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default', group_id text DEFAULT NULL)
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM skipq.send(queue, body::text, metadata, tags, delay_seconds, expiration_seconds,
                             max_receive_count, dead_letter_queue, message_id, client_id, tenant, group_id)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send_batch(
    queue text, bodies text[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default', group_ids text[] DEFAULT NULL)
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY(SELECT pg_catalog.convert_to(b, 'UTF8')
                     FROM pg_catalog.unnest(bodies) WITH ORDINALITY AS u(b, n) ORDER BY n),
        false, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant, group_ids) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send_batch(
    queue text, bodies bytea[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default', group_ids text[] DEFAULT NULL)
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, bodies, true, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant, group_ids) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send_batch(
    queue text, bodies jsonb[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default', group_ids text[] DEFAULT NULL)
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM skipq.send_batch(queue, bodies::text[], metadata, tags, delay_seconds,
                                   expiration_seconds, max_receive_count, dead_letter_queue,
                                   message_ids, client_id, tenant, group_ids)
$$;
-- +goose StatementEnd

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    skipq.send(text, text, text, jsonb, integer, integer, integer, text, text, text, text, text),
    skipq.send(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text, text),
    skipq.send(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text, text),
    skipq.send_batch(text, text[], text, jsonb, integer, integer, integer, text, text[], text, text, text[]),
    skipq.send_batch(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text, text[]),
    skipq.send_batch(text, jsonb[], text, jsonb, integer, integer, integer, text, text[], text, text, text[])
TO skipq_producer;

-- +goose Down
DROP FUNCTION skipq.send_batch(text, jsonb[], text, jsonb, integer, integer, integer, text, text[], text, text, text[]);
DROP FUNCTION skipq.send_batch(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text, text[]);
DROP FUNCTION skipq.send_batch(text, text[], text, jsonb, integer, integer, integer, text, text[], text, text, text[]);
DROP FUNCTION skipq.send(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text, text);
DROP FUNCTION skipq.send(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text, text);
DROP FUNCTION skipq.send(text, text, text, jsonb, integer, integer, integer, text, text, text, text, text);
DROP FUNCTION skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text, text[]);

-- +goose StatementBegin
CREATE FUNCTION skipq.enqueue(
    p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb,
    p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer,
    p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text)
RETURNS TABLE (message_id text, sequence bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    v_max_bytes  integer := skipq.limit_setting('max_message_bytes', 1048576);
    n            integer := coalesce(cardinality(p_bodies), 0);
    v_data       bytea;
    v_offsets    integer[];
    v_lengths    integer[];
    v_queue_id   bigint;
    v_fresh      integer := 0;
    i            integer;
    t            record;
    r            record;
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

    SELECT coalesce(string_agg(coalesce(u.b, '\x'::bytea), '\x'::bytea ORDER BY u.x), '\x'::bytea),
           array_agg(u.start::integer ORDER BY u.x), array_agg(u.len ORDER BY u.x)
    INTO v_data, v_offsets, v_lengths
    FROM (SELECT b, x, coalesce(length(b), 0) AS len,
                 1 + sum(coalesce(length(b), 0)) OVER (ORDER BY x) - coalesce(length(b), 0) AS start
          FROM unnest(p_bodies) WITH ORDINALITY AS u(b, x)) u;

    FOR r IN
        SELECT * FROM skipq.message_insert(
            p_tenant, p_queue, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT coalesce(p_message_ids[x], skipq.uuid_v7()::text)
                  FROM generate_series(1, n) x ORDER BY x),
            ARRAY(SELECT p_message_ids[x] IS NOT NULL FROM generate_series(1, n) x ORDER BY x),
            array_fill(v_client, ARRAY[n]), array_fill(v_metadata, ARRAY[n]),
            array_fill(p_body_binary, ARRAY[n]), array_fill(v_tags::text, ARRAY[n]),
            array_fill(coalesce(p_delay_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_expiration_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_max_receive_count, 0), ARRAY[n]),
            array_fill(coalesce(p_dead_letter_queue, ''), ARRAY[n]),
            array_fill(p_dead_letter_queue IS NOT NULL, ARRAY[n]),
            v_offsets, v_lengths, v_data) s
        ORDER BY s.pos
    LOOP
        PERFORM skipq.check(r.outcome <> 'group_required',
            'queue ' || quote_literal(p_queue) || ' is FIFO: every message needs a group_id');
        PERFORM skipq.check(r.outcome <> 'conflict',
            'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already sent with different content');
        message_id := r.message_id; sequence := r.sequence; duplicate := r.outcome = 'duplicate';
        v_queue_id := r.queue_id;
        IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
            v_fresh := v_fresh + 1;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- One notification per call, delivered at commit ("sql" is never a
    -- node id, so every node wakes its waiters).
    IF v_fresh > 0 THEN
        PERFORM skipq.wake('sql', ARRAY[v_queue_id], ARRAY[v_fresh]);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION
    skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text)
    FROM PUBLIC;
-- +goose StatementBegin
CREATE FUNCTION skipq.send(
    queue text, body text,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[pg_catalog.convert_to(body, 'UTF8')], false, metadata, tags, delay_seconds, expiration_seconds,
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
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM skipq.send(queue, body::text, metadata, tags, delay_seconds, expiration_seconds,
                             max_receive_count, dead_letter_queue, message_id, client_id, tenant)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.send_batch(
    queue text, bodies text[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY(SELECT pg_catalog.convert_to(b, 'UTF8')
                     FROM pg_catalog.unnest(bodies) WITH ORDINALITY AS u(b, n) ORDER BY n),
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
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM skipq.send_batch(queue, bodies::text[], metadata, tags, delay_seconds,
                                   expiration_seconds, max_receive_count, dead_letter_queue,
                                   message_ids, client_id, tenant)
$$;
-- +goose StatementEnd

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    skipq.send(text, text, text, jsonb, integer, integer, integer, text, text, text, text),
    skipq.send(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text),
    skipq.send(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text),
    skipq.send_batch(text, text[], text, jsonb, integer, integer, integer, text, text[], text, text),
    skipq.send_batch(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text),
    skipq.send_batch(text, jsonb[], text, jsonb, integer, integer, integer, text, text[], text, text)
TO skipq_producer;
