-- +goose Up
-- One implementation of a send after validation (policies, idempotency keys,
-- the insert with its ready row or timer), used by the HTTP API
-- (queries/messages.go's MessageInsert, through service/send.go) and by the
-- SQL API (skipq.enqueue below) alike. Before, the HTTP path did this in Go
-- plus three statements and the SQL path in a loop of its own here, with a
-- content hash written in both languages.
--
-- One row per input position (pos, 1-based; not in order): outcome 'sent' (inserted now),
-- 'duplicate' (a live idempotency key, or an earlier position of this call
-- with the same key, answers for it) or 'conflict' (the same key with
-- other content). When any position conflicts, nothing is inserted and only
-- the conflicting positions come back: a batch is all or nothing. No rows
-- at all: the queue does not exist (the caller creates it and calls again).
--
-- Arrays hold one element per message (-1 / 0 / dead_letter_queue_given =
-- false mean "absent": the queue's default applies, resolved here, once).
-- The bodies come as one bytea, p_body_data, cut at p_body_offsets
-- (1-based) and p_body_lengths: a bytea[] parameter is built by the driver
-- one element at a time in a growing buffer, five times its size in
-- garbage for a large batch, where one bytea is one copy.
--
-- The SET clauses are the plan settings of db/pool.go (only the intended
-- index probes are left; JIT off), here on the function, so that its caller
-- needs no settings of its own and the plans, cached by PL/pgSQL for the
-- server connection, are made under them.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_insert(
    p_tenant text, p_queue text, p_now timestamptz, p_server_max_receive_count integer,
    p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[],
    p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[],
    p_expiration_seconds integer[], p_max_receive_counts integer[],
    p_dead_letter_queues text[], p_dead_letter_queue_given boolean[],
    p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea)
RETURNS TABLE (pos integer, queue_id bigint, message_id text, sequence bigint, sent_at timestamptz,
               delayed_to timestamptz, expires_at timestamptz, outcome text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
AS $$
DECLARE
    q         skipq.queues;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    -- Per position, for keyed messages only: the content hash, and what a
    -- live key or an earlier position decided.
    v_hash    bytea[];
    v_outcome text[] := array_fill('sent'::text, ARRAY[n]);
    v_seq     bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    v_sent    timestamptz[] := array_fill(NULL::timestamptz, ARRAY[n]);
    v_delayed timestamptz[] := array_fill(NULL::timestamptz, ARRAY[n]);
    v_expires timestamptz[] := array_fill(NULL::timestamptz, ARRAY[n]);
    v_first   integer;
    v_sent_pos integer[];
    k         skipq.dedup_keys;
    i         integer;
BEGIN
    SELECT * INTO q FROM skipq.queues WHERE tenant = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RETURN;
    END IF;

    IF true = ANY(p_keyed) THEN
        -- Senders of the same key are serialized until commit, in the
        -- order of the locks' numbers so that two batches cannot deadlock;
        -- each statement below takes a new snapshot (READ COMMITTED) and
        -- so sees a key that the sender before committed.
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended(q.id::text || '/' || p_message_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE p_keyed[x] ORDER BY 1) l;
        v_hash := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        -- A live key (inside its window, or its message still in the
        -- queue) answers for the first position that carries it.
        FOR k IN
            SELECT d.* FROM skipq.dedup_keys d
            WHERE d.queue_id = q.id
              AND d.message_id = ANY(ARRAY(SELECT p_message_ids[x] FROM generate_subscripts(p_message_ids, 1) x
                                           WHERE p_keyed[x]))
              AND (d.window_ends > v_now OR EXISTS (
                  SELECT 1 FROM skipq.messages m WHERE m.queue_id = d.queue_id AND m.message_id = d.message_id))
        LOOP
            i := array_position(p_message_ids, k.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = k.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_seq[i] := k.sequence; v_sent[i] := k.sent_at;
            v_delayed[i] := k.delayed_to; v_expires[i] := k.expires_at;
        END LOOP;
        -- A key repeated within the call: each later position is a
        -- duplicate (or a conflict) of the first, and answers as it does.
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT p_keyed[i];
            v_first := array_position(p_message_ids, p_message_ids[i]);
            CONTINUE WHEN v_first = i;
            v_outcome[i] := CASE WHEN v_hash[i] = v_hash[v_first] THEN 'duplicate' ELSE 'conflict' END;
            v_seq[i] := v_seq[v_first]; v_sent[i] := v_sent[v_first];
            v_delayed[i] := v_delayed[v_first]; v_expires[i] := v_expires[v_first];
        END LOOP;
        IF 'conflict' = ANY(v_outcome) THEN
            RETURN QUERY
                SELECT x, q.id, p_message_ids[x], NULL::bigint, NULL::timestamptz, NULL::timestamptz,
                       NULL::timestamptz, 'conflict'::text
                FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'conflict' ORDER BY x;
            RETURN;
        END IF;
    END IF;

    v_sent_pos := ARRAY(SELECT x FROM generate_subscripts(p_message_ids, 1) x
                        WHERE v_outcome[x] = 'sent' ORDER BY x);
    RETURN QUERY
    WITH inserted AS (
        -- Sequences are drawn in position order (ORDER BY x): a batch's
        -- messages are delivered in the order they were given, and the
        -- k-th sequence is the k-th position sent.
        INSERT INTO skipq.messages AS msg (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready)
        SELECT q.id, p_message_ids[x], p_client_ids[x], p_metadatas[x],
               substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
               p_body_binaries[x], p_tags[x]::jsonb,
               v_now,
               v_now + make_interval(secs => p.delay_seconds),
               CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
               CASE WHEN p.expiration_seconds > 0
                    THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
               p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0
        FROM unnest(v_sent_pos) x
        CROSS JOIN LATERAL (SELECT
            CASE WHEN p_delay_seconds[x] < 0 THEN q.delay_seconds ELSE p_delay_seconds[x] END AS delay_seconds,
            CASE WHEN p_expiration_seconds[x] < 0 THEN q.expiration_seconds ELSE p_expiration_seconds[x] END
                AS expiration_seconds,
            CASE WHEN p_max_receive_counts[x] > 0 THEN p_max_receive_counts[x]
                 WHEN q.max_receive_count > 0 THEN q.max_receive_count
                 ELSE p_server_max_receive_count END AS max_receive_count,
            CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] ELSE q.dead_letter_queue END
                AS dead_letter_queue
        ) p
        ORDER BY x
        RETURNING msg.queue_id, msg.message_id, msg.sequence, msg.sent_at, msg.delayed_to, msg.expires_at,
                  msg.visible_at, msg.ready
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT r.queue_id, r.sequence FROM inserted r WHERE r.ready
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT r.visible_at, r.queue_id, r.sequence FROM inserted r WHERE NOT r.ready
    )
    SELECT v_sent_pos[s.k]::integer, s.queue_id, s.message_id, s.sequence, s.sent_at, s.delayed_to,
           s.expires_at, 'sent'::text
    FROM (SELECT r.*, row_number() OVER (ORDER BY r.sequence) AS k FROM inserted r) s;

    IF v_hash IS NOT NULL THEN
        -- The keys of the messages just sent, read back by their ids. A key
        -- still present but no longer live (window over, message gone) is
        -- replaced.
        INSERT INTO skipq.dedup_keys AS d (
            queue_id, message_id, content_hash, sequence, sent_at, delayed_to, expires_at, window_ends)
        SELECT m.queue_id, m.message_id, v_hash[x], m.sequence, m.sent_at, m.delayed_to, m.expires_at,
               m.sent_at + make_interval(secs => q.dedup_window_seconds)
        FROM generate_subscripts(p_message_ids, 1) x
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m
                            WHERE m.message_id = p_message_ids[x] AND m.queue_id = q.id) m
        WHERE p_keyed[x] AND v_outcome[x] = 'sent'
        ON CONFLICT ON CONSTRAINT dedup_keys_pkey DO UPDATE SET
            content_hash = excluded.content_hash, sequence = excluded.sequence,
            sent_at = excluded.sent_at, delayed_to = excluded.delayed_to,
            expires_at = excluded.expires_at, window_ends = excluded.window_ends;
        -- Duplicates: of a live key (its send), or of an earlier position
        -- (the message it sent just now).
        RETURN QUERY
        SELECT x, q.id, p_message_ids[x], coalesce(v_seq[x], m.sequence), coalesce(v_sent[x], m.sent_at),
               CASE WHEN v_seq[x] IS NULL THEN m.delayed_to ELSE v_delayed[x] END,
               CASE WHEN v_seq[x] IS NULL THEN m.expires_at ELSE v_expires[x] END,
               'duplicate'::text
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN LATERAL (SELECT * FROM skipq.messages m
                           WHERE m.message_id = p_message_ids[x] AND m.queue_id = q.id AND v_seq[x] IS NULL) m ON true
        WHERE v_outcome[x] = 'duplicate';
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_insert(text, text, timestamptz, integer, text[], boolean[], text[], text[],
    boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea) FROM PUBLIC;

-- skipq.wake announces that counts of messages became available in queues,
-- to every node's listener, at the commit of the transaction that calls it:
-- the one place in SQL that writes the wake-up channel and payload
-- ("source queue count", parsed by wake.ParseNotice, wake/hub.go). Nodes call
-- it through WakeNotify (source: their id), the SQL API with source "sql"
-- (never a node id, so every node wakes its waiters).
-- +goose StatementBegin
CREATE FUNCTION skipq.wake(p_source text, p_queue_ids bigint[], p_counts integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_notify('skipq_wake', p_source || ' ' || w.q || ' ' || w.c)
    FROM unnest(p_queue_ids, p_counts) AS w(q, c);
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.wake(text, bigint[], integer[]) FROM PUBLIC;

-- The SQL send: validates (the same rules as the HTTP API's service/send.go;
-- a test feeds both the same messages), creates the queue if missing, and
-- sends through skipq.message_insert. One row per body, in order; a
-- conflicting key raises 22023 like any invalid argument. Owner, SECURITY
-- DEFINER and the pinned search_path are restated: CREATE OR REPLACE resets
-- them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.enqueue(
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

-- +goose Down
DROP FUNCTION skipq.message_insert(text, text, timestamptz, integer, text[], boolean[], text[], text[],
    boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea);
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
DROP FUNCTION skipq.wake(text, bigint[], integer[]);
