-- +goose Up
-- The SQL API's checks without a statement a check, and its handles parsed
-- by a plan kept for the session.
--
-- Each `PERFORM skipq.check(condition, message)` ran a statement through
-- the executor and a call of a PL/pgSQL function with its search_path
-- setting, tens of thousands of instructions even when the input was fine,
-- and built the error's message every time: skipq.send_check ran four of
-- them for every message, skipq.enqueue and skipq.publish_bodies three
-- more for every answer row, skipq.check_queue_name three a name, and the
-- settling functions one a call. Now the condition is an IF, which
-- PL/pgSQL evaluates directly, and skipq.check raises only when it fails:
-- the same conditions, messages and SQLSTATE, in the same order.
--
-- skipq.receipts_parse becomes PL/pgSQL: as a SQL function with a SET
-- clause it was never inlined and its query was planned on every call.
--
-- Instructions (callgrind, docs/PERFORMANCE.md): skipq.enqueue of 100
-- messages 39.1 M -> 15.2 M, of one 2.44 M -> 1.92 M; skipq.ack of an
-- array of one handle 1.34 M -> 0.65 M.
--
-- Same signatures. The Down restores the previous bodies.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.check_queue_name(field text, name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF NOT coalesce(name IS NOT NULL AND octet_length(name) BETWEEN 1 AND 256, false) THEN
        PERFORM skipq.check(false, field || ' must be 1 to 256 bytes');
    END IF;
    IF NOT coalesce(name !~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000*>/]', false) THEN
        PERFORM skipq.check(false, field || ' must not contain whitespace, control characters, "*", ">" or "/"');
    END IF;
    IF NOT coalesce(right(name, 1) <> '.', false) THEN
        PERFORM skipq.check(false, field || ' must not end with "."');
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_check(p_queue text, p_bodies bytea[], p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_group_ids text[]) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_max_bytes integer := skipq.limit_setting('max_message_bytes', 1048576);
    i           integer;
    t           record;
BEGIN
    IF NOT coalesce(coalesce(cardinality(p_bodies), 0) BETWEEN 1 AND 1000, false) THEN
        PERFORM skipq.check(false, 'a batch holds 1 to 1000 messages');
    END IF;
    IF NOT coalesce(jsonb_typeof(p_tags) = 'object', false) THEN
        PERFORM skipq.check(false, 'tags must be a JSON object of strings');
    END IF;
    IF NOT coalesce((SELECT count(*) FROM jsonb_object_keys(p_tags)) <= 32, false) THEN
        PERFORM skipq.check(false, 'tags: at most 32');
    END IF;
    FOR t IN SELECT key, value FROM jsonb_each(p_tags) LOOP
        IF NOT coalesce(t.key ~ '^[A-Za-z0-9_.-]{1,64}$', false) THEN
            PERFORM skipq.check(false, 'tag key ' || quote_literal(t.key) || ' must match ^[A-Za-z0-9_.-]{1,64}$');
        END IF;
        IF NOT coalesce(left(t.key, 6) <> 'skipq.', false) THEN
            PERFORM skipq.check(false, 'tag keys must not start with "skipq."');
        END IF;
        IF NOT coalesce(jsonb_typeof(t.value) = 'string', false) THEN
            PERFORM skipq.check(false, 'tag ' || quote_literal(t.key) || ' must be a string');
        END IF;
        IF NOT coalesce(octet_length(t.value #>> '{}') <= 1024, false) THEN
            PERFORM skipq.check(false, 'tag ' || quote_literal(t.key) || ': values are at most 1024 bytes');
        END IF;
    END LOOP;
    IF NOT coalesce(p_delay_seconds IS NULL OR p_delay_seconds BETWEEN 0 AND skipq.limit_setting('max_delay_seconds', 43200), false) THEN
        PERFORM skipq.check(false, 'delay_seconds is out of range');
    END IF;
    IF NOT coalesce(p_expiration_seconds IS NULL OR p_expiration_seconds BETWEEN 0 AND skipq.limit_setting('max_expiration_seconds', 43200), false) THEN
        PERFORM skipq.check(false, 'expiration_seconds is out of range');
    END IF;
    IF NOT coalesce(p_max_receive_count IS NULL OR p_max_receive_count BETWEEN 0 AND skipq.limit_setting('max_receive_count', 1024), false) THEN
        PERFORM skipq.check(false, 'max_receive_count is out of range');
    END IF;
    IF p_dead_letter_queue IS NOT NULL AND p_dead_letter_queue <> '' THEN
        PERFORM skipq.check_queue_name('dead_letter_queue', p_dead_letter_queue);
        -- Its messages would come back with a fresh receive count forever.
        IF NOT coalesce(p_queue IS NULL OR p_dead_letter_queue <> p_queue, false) THEN
            PERFORM skipq.check(false, 'dead_letter_queue must not be the queue itself');
        END IF;
    END IF;
    IF NOT coalesce(octet_length(p_client_id) <= 256, false) THEN
        PERFORM skipq.check(false, 'client_id must be at most 256 bytes');
    END IF;
    IF NOT coalesce(p_message_ids IS NULL OR cardinality(p_message_ids) = cardinality(p_bodies), false) THEN
        PERFORM skipq.check(false, 'message_ids must have one id per body');
    END IF;
    IF NOT coalesce(p_group_ids IS NULL OR cardinality(p_group_ids) = cardinality(p_bodies), false) THEN
        PERFORM skipq.check(false, 'group_ids must have one group per body');
    END IF;
    IF NOT coalesce(p_group_ids IS NULL OR (SELECT count(DISTINCT g) FROM unnest(p_group_ids) g) <= 64, false) THEN
        PERFORM skipq.check(false, 'a batch names at most 64 distinct group ids');
    END IF;
    FOR i IN 1 .. cardinality(p_bodies) LOOP
        IF NOT coalesce(coalesce(length(p_bodies[i]), 0) > 0 OR p_metadata <> '', false) THEN
            PERFORM skipq.check(false, 'body or metadata must be non-empty');
        END IF;
        IF NOT coalesce(coalesce(length(p_bodies[i]), 0) + octet_length(p_metadata) <= v_max_bytes, false) THEN
            PERFORM skipq.check(false, 'body and metadata together exceed ' || v_max_bytes || ' bytes');
        END IF;
        IF NOT coalesce(p_message_ids IS NULL OR p_message_ids[i] IS NULL OR p_message_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$', false) THEN
            PERFORM skipq.check(false, 'message_id must match ^[A-Za-z0-9._:-]{1,128}$');
        END IF;
        IF NOT coalesce(p_group_ids IS NULL OR p_group_ids[i] IS NULL OR p_group_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$', false) THEN
            PERFORM skipq.check(false, 'group_id must match ^[A-Za-z0-9._:-]{1,128}$');
        END IF;
    END LOOP;
END $_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.enqueue(p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[]) RETURNS TABLE(message_id text, sequence bigint, duplicate boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    n            integer := coalesce(cardinality(p_bodies), 0);
    v_data       bytea;
    v_offsets    integer[];
    v_lengths    integer[];
    v_queue_id   bigint;
    v_fresh      integer := 0;
    r            record;
BEGIN
    IF NOT coalesce(p_tenant IS NOT NULL AND p_tenant <> '', false) THEN
        PERFORM skipq.check(false, 'tenant must not be empty');
    END IF;
    PERFORM skipq.check_queue_name('queue', p_queue);
    PERFORM skipq.send_check(p_queue, p_bodies, v_metadata, v_tags, p_delay_seconds, p_expiration_seconds,
                             p_max_receive_count, p_dead_letter_queue, p_message_ids, v_client, p_group_ids);

    -- A queue created by a send with groups is FIFO (docs/FIFO.md).
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
        IF NOT coalesce(r.outcome <> 'group_required', false) THEN
            PERFORM skipq.check(false, 'queue ' || quote_literal(p_queue) || ' is FIFO: every message needs a group_id');
        END IF;
        IF NOT coalesce(r.outcome <> 'group_refused', false) THEN
            PERFORM skipq.check(false, 'queue ' || quote_literal(p_queue) || ' is not FIFO: group_id is not allowed');
        END IF;
        IF NOT coalesce(r.outcome <> 'conflict', false) THEN
            PERFORM skipq.check(false, 'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already sent with different content');
        END IF;
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.publish_bodies(p_topic text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_tags    jsonb := coalesce(p_tags, '{}'::jsonb);
    v_meta    text := coalesce(p_metadata, '');
    v_client  text := coalesce(p_client_id, '');
    n         integer := coalesce(cardinality(p_bodies), 0);
    v_data    bytea;
    v_offsets integer[];
    v_lengths integer[];
    v_reached integer := 0;
    v_woken   bigint[] := '{}';
    r         record;
BEGIN
    IF NOT coalesce(p_tenant IS NOT NULL AND p_tenant <> '', false) THEN
        PERFORM skipq.check(false, 'tenant must not be empty');
    END IF;
    PERFORM skipq.check_queue_name('topic', p_topic);
    PERFORM skipq.send_check(NULL, p_bodies, v_meta, v_tags, p_delay_seconds, p_expiration_seconds,
                             p_max_receive_count, p_dead_letter_queue, p_message_ids, v_client, p_group_ids);
    SELECT coalesce(string_agg(coalesce(u.b, '\x'::bytea), '\x'::bytea ORDER BY u.x), '\x'::bytea),
           array_agg(u.start::integer ORDER BY u.x), array_agg(u.len ORDER BY u.x)
    INTO v_data, v_offsets, v_lengths
    FROM (SELECT b, x, coalesce(length(b), 0) AS len,
                 1 + sum(coalesce(length(b), 0)) OVER (ORDER BY x) - coalesce(length(b), 0) AS start
          FROM unnest(p_bodies) WITH ORDINALITY AS u(b, x)) u;
    FOR r IN
        SELECT * FROM skipq.topic_publish(
            p_tenant, p_topic, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT coalesce(p_message_ids[x], skipq.uuid_v7()::text) FROM generate_series(1, n) x ORDER BY x),
            ARRAY(SELECT p_message_ids[x] IS NOT NULL FROM generate_series(1, n) x ORDER BY x),
            array_fill(v_client, ARRAY[n]), array_fill(v_meta, ARRAY[n]),
            array_fill(p_body_binary, ARRAY[n]), array_fill(v_tags::text, ARRAY[n]),
            array_fill(coalesce(p_delay_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_expiration_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_max_receive_count, 0), ARRAY[n]),
            array_fill(coalesce(p_dead_letter_queue, ''), ARRAY[n]),
            array_fill(p_dead_letter_queue IS NOT NULL, ARRAY[n]),
            v_offsets, v_lengths, v_data, p_group_ids, NULL)
    LOOP
        IF NOT coalesce(r.outcome <> 'group_required', false) THEN
            PERFORM skipq.check(false, 'topic ' || quote_literal(p_topic) || ' is FIFO: every message needs a group_id');
        END IF;
        IF NOT coalesce(r.outcome <> 'group_refused', false) THEN
            PERFORM skipq.check(false, 'topic ' || quote_literal(p_topic) || ' is not FIFO: group_id is not allowed');
        END IF;
        IF NOT coalesce(r.outcome <> 'conflict', false) THEN
            PERFORM skipq.check(false, 'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already published with different content');
        END IF;
        v_reached := v_reached + r.delivered_to;
        v_woken := v_woken || r.woken;
    END LOOP;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: topic % does not exist', quote_literal(p_topic) USING ERRCODE = 'SQ404';
    END IF;
    IF cardinality(v_woken) > 0 THEN
        -- One notification per queue, delivered at commit ("sql" is never
        -- a node id, so every node wakes its waiters).
        PERFORM skipq.wake('sql', array_agg(w.q ORDER BY w.q), array_agg(w.c ORDER BY w.q))
        FROM (SELECT u AS q, count(*)::integer AS c FROM unnest(v_woken) u GROUP BY u) w;
    END IF;
    RETURN v_reached;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handles text[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    k record;
    a record;
BEGIN
    IF NOT coalesce(receipt_handles IS NOT NULL AND cardinality(receipt_handles) BETWEEN 1 AND 1024, false) THEN
        PERFORM skipq.check(false, 'receipt_handles must hold 1 to 1024 handles');
    END IF;
    SELECT array_agg(p.queue_id ORDER BY p.queue_id, p.sequence) AS q,
           array_agg(p.sequence ORDER BY p.queue_id, p.sequence) AS s,
           array_agg(p.token ORDER BY p.queue_id, p.sequence) AS t
    INTO k FROM skipq.receipts_parse(receipt_handles) p;
    SELECT count(*)::integer AS n, array_agg(m.queue_id) AS q, array_agg(m.group_id) AS g INTO a
    FROM skipq.message_ack(k.q, k.s, k.t) m;
    IF a.n <> cardinality(receipt_handles) THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404',
            DETAIL = format('%s of %s handles settled nothing', cardinality(receipt_handles) - a.n,
                            cardinality(receipt_handles));
    END IF;
    IF cardinality(array_remove(a.g, NULL)) > 0 THEN
        PERFORM skipq.wake_groups(a.q, a.g);
    END IF;
    RETURN a.n;
END $$;

CREATE OR REPLACE FUNCTION skipq.ack(receipt_handle text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r record;
    a record;
BEGIN
    r := skipq.receipt_parse(receipt_handle);
    SELECT m.queue_id, m.group_id INTO a
    FROM skipq.message_ack(ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token]) m;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    IF a.group_id IS NOT NULL THEN
        PERFORM skipq.wake_groups(ARRAY[a.queue_id], ARRAY[a.group_id]);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.try_ack(receipt_handles text[]) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    k record;
    a record;
BEGIN
    IF NOT coalesce(receipt_handles IS NOT NULL AND cardinality(receipt_handles) <= 1024, false) THEN
        PERFORM skipq.check(false, 'receipt_handles must hold at most 1024 handles');
    END IF;
    SELECT array_agg(p.handle ORDER BY p.queue_id, p.sequence) AS h,
           array_agg(p.queue_id ORDER BY p.queue_id, p.sequence) AS q,
           array_agg(p.sequence ORDER BY p.queue_id, p.sequence) AS s,
           array_agg(p.token ORDER BY p.queue_id, p.sequence) AS t
    INTO k FROM skipq.receipts_parse(receipt_handles) p;
    SELECT array_agg(m.queue_id) AS q, array_agg(m.sequence) AS s, array_agg(m.lease_token) AS t,
           array_agg(m.group_id) AS g
    INTO a FROM skipq.message_ack(k.q, k.s, k.t) m;
    IF cardinality(array_remove(a.g, NULL)) > 0 THEN
        PERFORM skipq.wake_groups(a.q, a.g);
    END IF;
    -- A handle settled if its message went with its token (a stale handle
    -- of the same message, given next to the live one, did not).
    RETURN QUERY
    SELECT u.h FROM unnest(k.h, k.q, k.s, k.t) AS u(h, q, s, t)
    WHERE EXISTS (SELECT 1 FROM unnest(a.q, a.s, a.t) AS x(q, s, t)
                  WHERE x.q = u.q AND x.s = u.s AND x.t = u.t);
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.nack(receipt_handle text, reason text DEFAULT NULL::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r record;
    n record;
BEGIN
    IF NOT coalesce(octet_length(reason) IS NULL OR octet_length(reason) <= 1024, false) THEN
        PERFORM skipq.check(false, 'reason must be at most 1024 bytes');
    END IF;
    r := skipq.receipt_parse(receipt_handle);
    SELECT * INTO n FROM skipq.message_nack(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                            ARRAY[reason], skipq.limit_setting('max_receive_count', 1024));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    -- Delivered at commit ("sql" is never a node id: every node wakes its
    -- waiters). A discarded message wakes nobody.
    IF NOT n.discarded THEN
        PERFORM skipq.wake('sql', ARRAY[coalesce(n.moved_to, n.queue_id)], ARRAY[1]);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.set_visibility(receipt_handle text, visibility_seconds integer) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r record;
    v_until timestamptz;
BEGIN
    IF NOT coalesce(visibility_seconds BETWEEN 0 AND 43200, false) THEN
        PERFORM skipq.check(false, 'visibility_seconds must be between 0 and 43200');
    END IF;
    IF visibility_seconds = 0 THEN
        v_until := clock_timestamp();
        PERFORM skipq.nack(receipt_handle);
        RETURN v_until;
    END IF;
    r := skipq.receipt_parse(receipt_handle);
    SELECT e.visible_at INTO v_until
    FROM skipq.message_set_visibility(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                      ARRAY[visibility_seconds]) e;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    RETURN v_until;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receipts_parse(p_handles text[]) RETURNS TABLE(handle text, queue_id bigint, sequence bigint, token bytea)
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- PL/pgSQL, not SQL: a SQL function with a SET clause is never inlined,
    -- and its query was planned again on every call (half of an SQL ack of
    -- one handle); PL/pgSQL keeps the plan for the session.
    RETURN QUERY
    SELECT DISTINCT ON (k.queue_id, k.sequence, k.token) k.h, k.queue_id, k.sequence, k.token
    FROM (SELECT h.h, h.n,
                 ('x' || encode(substr(d.b, 1, 8), 'hex'))::bit(64)::bigint AS queue_id,
                 ('x' || encode(substr(d.b, 9, 8), 'hex'))::bit(64)::bigint AS sequence,
                 substr(d.b, 17, 32) AS token
          FROM unnest(p_handles) WITH ORDINALITY AS h(h, n)
          -- OFFSET 0: decoded once per handle, not once per use of b. The
          -- base64url alphabet back to base64's by replace() (receipt_parse
          -- says why not translate()).
          CROSS JOIN LATERAL (SELECT CASE WHEN octet_length(h.h) = 64
                                               AND h.h !~ '[^ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-]'
                                          THEN decode(replace(replace(h.h, '-', '+'), '_', '/'), 'base64') END AS b OFFSET 0) d
          WHERE d.b IS NOT NULL) k
    ORDER BY k.queue_id, k.sequence, k.token, k.n;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.check_queue_name(field text, name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM skipq.check(name IS NOT NULL AND octet_length(name) BETWEEN 1 AND 256,
                        field || ' must be 1 to 256 bytes');
    PERFORM skipq.check(name !~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000*>/]',
                        field || ' must not contain whitespace, control characters, "*", ">" or "/"');
    PERFORM skipq.check(right(name, 1) <> '.', field || ' must not end with "."');
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_check(p_queue text, p_bodies bytea[], p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_group_ids text[]) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_max_bytes integer := skipq.limit_setting('max_message_bytes', 1048576);
    i           integer;
    t           record;
BEGIN
    PERFORM skipq.check(coalesce(cardinality(p_bodies), 0) BETWEEN 1 AND 1000, 'a batch holds 1 to 1000 messages');
    PERFORM skipq.check(jsonb_typeof(p_tags) = 'object', 'tags must be a JSON object of strings');
    PERFORM skipq.check((SELECT count(*) FROM jsonb_object_keys(p_tags)) <= 32, 'tags: at most 32');
    FOR t IN SELECT key, value FROM jsonb_each(p_tags) LOOP
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
        PERFORM skipq.check(p_queue IS NULL OR p_dead_letter_queue <> p_queue, 'dead_letter_queue must not be the queue itself');
    END IF;
    PERFORM skipq.check(octet_length(p_client_id) <= 256, 'client_id must be at most 256 bytes');
    PERFORM skipq.check(p_message_ids IS NULL OR cardinality(p_message_ids) = cardinality(p_bodies),
                        'message_ids must have one id per body');
    PERFORM skipq.check(p_group_ids IS NULL OR cardinality(p_group_ids) = cardinality(p_bodies),
                        'group_ids must have one group per body');
    PERFORM skipq.check(p_group_ids IS NULL OR (SELECT count(DISTINCT g) FROM unnest(p_group_ids) g) <= 64,
                        'a batch names at most 64 distinct group ids');
    FOR i IN 1 .. cardinality(p_bodies) LOOP
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) > 0 OR p_metadata <> '', 'body or metadata must be non-empty');
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) + octet_length(p_metadata) <= v_max_bytes,
                            'body and metadata together exceed ' || v_max_bytes || ' bytes');
        PERFORM skipq.check(p_message_ids IS NULL OR p_message_ids[i] IS NULL OR p_message_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'message_id must match ^[A-Za-z0-9._:-]{1,128}$');
        PERFORM skipq.check(p_group_ids IS NULL OR p_group_ids[i] IS NULL OR p_group_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'group_id must match ^[A-Za-z0-9._:-]{1,128}$');
    END LOOP;
END $_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.enqueue(p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[]) RETURNS TABLE(message_id text, sequence bigint, duplicate boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    n            integer := coalesce(cardinality(p_bodies), 0);
    v_data       bytea;
    v_offsets    integer[];
    v_lengths    integer[];
    v_queue_id   bigint;
    v_fresh      integer := 0;
    r            record;
BEGIN
    PERFORM skipq.check(p_tenant IS NOT NULL AND p_tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue', p_queue);
    PERFORM skipq.send_check(p_queue, p_bodies, v_metadata, v_tags, p_delay_seconds, p_expiration_seconds,
                             p_max_receive_count, p_dead_letter_queue, p_message_ids, v_client, p_group_ids);

    -- A queue created by a send with groups is FIFO (docs/FIFO.md).
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.publish_bodies(p_topic text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_tags    jsonb := coalesce(p_tags, '{}'::jsonb);
    v_meta    text := coalesce(p_metadata, '');
    v_client  text := coalesce(p_client_id, '');
    n         integer := coalesce(cardinality(p_bodies), 0);
    v_data    bytea;
    v_offsets integer[];
    v_lengths integer[];
    v_reached integer := 0;
    v_woken   bigint[] := '{}';
    r         record;
BEGIN
    PERFORM skipq.check(p_tenant IS NOT NULL AND p_tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('topic', p_topic);
    PERFORM skipq.send_check(NULL, p_bodies, v_meta, v_tags, p_delay_seconds, p_expiration_seconds,
                             p_max_receive_count, p_dead_letter_queue, p_message_ids, v_client, p_group_ids);
    SELECT coalesce(string_agg(coalesce(u.b, '\x'::bytea), '\x'::bytea ORDER BY u.x), '\x'::bytea),
           array_agg(u.start::integer ORDER BY u.x), array_agg(u.len ORDER BY u.x)
    INTO v_data, v_offsets, v_lengths
    FROM (SELECT b, x, coalesce(length(b), 0) AS len,
                 1 + sum(coalesce(length(b), 0)) OVER (ORDER BY x) - coalesce(length(b), 0) AS start
          FROM unnest(p_bodies) WITH ORDINALITY AS u(b, x)) u;
    FOR r IN
        SELECT * FROM skipq.topic_publish(
            p_tenant, p_topic, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT coalesce(p_message_ids[x], skipq.uuid_v7()::text) FROM generate_series(1, n) x ORDER BY x),
            ARRAY(SELECT p_message_ids[x] IS NOT NULL FROM generate_series(1, n) x ORDER BY x),
            array_fill(v_client, ARRAY[n]), array_fill(v_meta, ARRAY[n]),
            array_fill(p_body_binary, ARRAY[n]), array_fill(v_tags::text, ARRAY[n]),
            array_fill(coalesce(p_delay_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_expiration_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_max_receive_count, 0), ARRAY[n]),
            array_fill(coalesce(p_dead_letter_queue, ''), ARRAY[n]),
            array_fill(p_dead_letter_queue IS NOT NULL, ARRAY[n]),
            v_offsets, v_lengths, v_data, p_group_ids, NULL)
    LOOP
        PERFORM skipq.check(r.outcome <> 'group_required',
            'topic ' || quote_literal(p_topic) || ' is FIFO: every message needs a group_id');
        PERFORM skipq.check(r.outcome <> 'group_refused',
            'topic ' || quote_literal(p_topic) || ' is not FIFO: group_id is not allowed');
        PERFORM skipq.check(r.outcome <> 'conflict',
            'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already published with different content');
        v_reached := v_reached + r.delivered_to;
        v_woken := v_woken || r.woken;
    END LOOP;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: topic % does not exist', quote_literal(p_topic) USING ERRCODE = 'SQ404';
    END IF;
    IF cardinality(v_woken) > 0 THEN
        -- One notification per queue, delivered at commit ("sql" is never
        -- a node id, so every node wakes its waiters).
        PERFORM skipq.wake('sql', array_agg(w.q ORDER BY w.q), array_agg(w.c ORDER BY w.q))
        FROM (SELECT u AS q, count(*)::integer AS c FROM unnest(v_woken) u GROUP BY u) w;
    END IF;
    RETURN v_reached;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handles text[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    k record;
    a record;
BEGIN
    PERFORM skipq.check(receipt_handles IS NOT NULL AND cardinality(receipt_handles) BETWEEN 1 AND 1024,
                        'receipt_handles must hold 1 to 1024 handles');
    SELECT array_agg(p.queue_id ORDER BY p.queue_id, p.sequence) AS q,
           array_agg(p.sequence ORDER BY p.queue_id, p.sequence) AS s,
           array_agg(p.token ORDER BY p.queue_id, p.sequence) AS t
    INTO k FROM skipq.receipts_parse(receipt_handles) p;
    SELECT count(*)::integer AS n, array_agg(m.queue_id) AS q, array_agg(m.group_id) AS g INTO a
    FROM skipq.message_ack(k.q, k.s, k.t) m;
    IF a.n <> cardinality(receipt_handles) THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404',
            DETAIL = format('%s of %s handles settled nothing', cardinality(receipt_handles) - a.n,
                            cardinality(receipt_handles));
    END IF;
    IF cardinality(array_remove(a.g, NULL)) > 0 THEN
        PERFORM skipq.wake_groups(a.q, a.g);
    END IF;
    RETURN a.n;
END $$;

CREATE OR REPLACE FUNCTION skipq.ack(receipt_handle text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r record;
    a record;
BEGIN
    r := skipq.receipt_parse(receipt_handle);
    SELECT m.queue_id, m.group_id INTO a
    FROM skipq.message_ack(ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token]) m;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    IF a.group_id IS NOT NULL THEN
        PERFORM skipq.wake_groups(ARRAY[a.queue_id], ARRAY[a.group_id]);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.try_ack(receipt_handles text[]) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    k record;
    a record;
BEGIN
    PERFORM skipq.check(receipt_handles IS NOT NULL AND cardinality(receipt_handles) <= 1024,
                        'receipt_handles must hold at most 1024 handles');
    SELECT array_agg(p.handle ORDER BY p.queue_id, p.sequence) AS h,
           array_agg(p.queue_id ORDER BY p.queue_id, p.sequence) AS q,
           array_agg(p.sequence ORDER BY p.queue_id, p.sequence) AS s,
           array_agg(p.token ORDER BY p.queue_id, p.sequence) AS t
    INTO k FROM skipq.receipts_parse(receipt_handles) p;
    SELECT array_agg(m.queue_id) AS q, array_agg(m.sequence) AS s, array_agg(m.lease_token) AS t,
           array_agg(m.group_id) AS g
    INTO a FROM skipq.message_ack(k.q, k.s, k.t) m;
    IF cardinality(array_remove(a.g, NULL)) > 0 THEN
        PERFORM skipq.wake_groups(a.q, a.g);
    END IF;
    -- A handle settled if its message went with its token (a stale handle
    -- of the same message, given next to the live one, did not).
    RETURN QUERY
    SELECT u.h FROM unnest(k.h, k.q, k.s, k.t) AS u(h, q, s, t)
    WHERE EXISTS (SELECT 1 FROM unnest(a.q, a.s, a.t) AS x(q, s, t)
                  WHERE x.q = u.q AND x.s = u.s AND x.t = u.t);
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.nack(receipt_handle text, reason text DEFAULT NULL::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r record;
    n record;
BEGIN
    PERFORM skipq.check(octet_length(reason) IS NULL OR octet_length(reason) <= 1024,
                        'reason must be at most 1024 bytes');
    r := skipq.receipt_parse(receipt_handle);
    SELECT * INTO n FROM skipq.message_nack(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                            ARRAY[reason], skipq.limit_setting('max_receive_count', 1024));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    -- Delivered at commit ("sql" is never a node id: every node wakes its
    -- waiters). A discarded message wakes nobody.
    IF NOT n.discarded THEN
        PERFORM skipq.wake('sql', ARRAY[coalesce(n.moved_to, n.queue_id)], ARRAY[1]);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.set_visibility(receipt_handle text, visibility_seconds integer) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r record;
    v_until timestamptz;
BEGIN
    PERFORM skipq.check(visibility_seconds BETWEEN 0 AND 43200, 'visibility_seconds must be between 0 and 43200');
    IF visibility_seconds = 0 THEN
        v_until := clock_timestamp();
        PERFORM skipq.nack(receipt_handle);
        RETURN v_until;
    END IF;
    r := skipq.receipt_parse(receipt_handle);
    SELECT e.visible_at INTO v_until
    FROM skipq.message_set_visibility(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                      ARRAY[visibility_seconds]) e;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    RETURN v_until;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receipts_parse(p_handles text[]) RETURNS TABLE(handle text, queue_id bigint, sequence bigint, token bytea)
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT DISTINCT ON (k.queue_id, k.sequence, k.token) k.h, k.queue_id, k.sequence, k.token
    FROM (SELECT h.h, h.n,
                 ('x' || encode(substr(d.b, 1, 8), 'hex'))::bit(64)::bigint AS queue_id,
                 ('x' || encode(substr(d.b, 9, 8), 'hex'))::bit(64)::bigint AS sequence,
                 substr(d.b, 17, 32) AS token
          FROM unnest(p_handles) WITH ORDINALITY AS h(h, n)
          -- OFFSET 0: decoded once per handle, not once per use of b. The
          -- base64url alphabet back to base64's by replace() (receipt_parse
          -- says why not translate()).
          CROSS JOIN LATERAL (SELECT CASE WHEN octet_length(h.h) = 64
                                               AND h.h !~ '[^ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-]'
                                          THEN decode(replace(replace(h.h, '-', '+'), '_', '/'), 'base64') END AS b OFFSET 0) d
          WHERE d.b IS NOT NULL) k
    ORDER BY k.queue_id, k.sequence, k.token, k.n
$$;
-- +goose StatementEnd
