-- +goose Up
-- The SQL consumer's calls do the work of the HTTP ones and no more
-- (issue 29: skipq.receive and skipq.ack at 1 x 1 did a sixth of the raw
-- baseline's messages/s; per statement, a receive cost several times the
-- claim inside it). Same signatures, results and errors:
--
-- skipq.receive checks its arguments in plain IF tests instead of a
-- PERFORM of skipq.check each (a call through a function with its own
-- search_path per check); checks a queue name's form only for a queue that
-- does not exist (a queue's name was checked when it was created, and a
-- missing queue still raises 22023 for a malformed name), with the lookup
-- that tells a FIFO queue from a standard one; and claims through
-- skipq.message_claim, which runs the claim of the queue's kind.
-- A body is read through skipq.topic_body only for a topic copy (a message
-- tagged skipq.body): a SQL function with its own search_path is not
-- inlined, so every receive planned its query again.
--
-- skipq.ack and skipq.try_ack wake FIFO groups only when a settled
-- message had a group: skipq.wake_groups ran a query per call to find
-- there was none on a standard queue.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_fifo boolean;
BEGIN
    IF receive.tenant IS NULL OR receive.tenant = '' THEN
        RAISE EXCEPTION 'skipq: tenant must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.fifo INTO v_fifo FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name;
    IF NOT FOUND THEN
        PERFORM skipq.check_queue_name('queue_name', queue_name);
    END IF;
    IF max_messages IS NULL OR max_messages NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'skipq: max_messages must be between 1 and 1024' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF visibility_seconds NOT BETWEEN 1 AND 43200 THEN
        RAISE EXCEPTION 'skipq: visibility_seconds must be between 1 and 43200' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_messages_per_group IS NULL OR max_messages_per_group NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'skipq: max_messages_per_group must be between 1 and 10'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- In the claim's order: a standard queue's by sequence, a FIFO
    -- queue's groups in rotation, each group's run in order. The handle as
    -- service/receipt.go encodes it (base64url, no padding; 48 bytes give
    -- 64 characters, under encode()'s 76 per line). A group only from a
    -- FIFO queue, as the standard queue's answer always had none.
    RETURN QUERY
    SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
           queue_name, m.message_id, m.sequence,
           CASE WHEN v_fifo THEN m.group_id END, m.client_id, m.metadata,
           CASE WHEN m.tags ? 'skipq.body' THEN skipq.topic_body(m.body, m.tags) ELSE m.body END,
           m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0, NULL, max_messages_per_group, 'claim') m;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handle text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

-- (Replaced through EXECUTE for the reason 00012 created it so: sqlc stops
-- at a second definition of skipq.ack.)
-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE $sql$
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handles text[]) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
$sql$;
END $do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.try_ack(receipt_handles text[]) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM skipq.check(receive.tenant IS NOT NULL AND receive.tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue_name', queue_name);
    PERFORM skipq.check(max_messages BETWEEN 1 AND 1024, 'max_messages must be between 1 and 1024');
    PERFORM skipq.check(visibility_seconds IS NULL OR visibility_seconds BETWEEN 1 AND 43200,
                        'visibility_seconds must be between 1 and 43200');
    PERFORM skipq.check(max_messages_per_group BETWEEN 1 AND 10, 'max_messages_per_group must be between 1 and 10');
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name AND q.fifo) THEN
        -- A FIFO queue: groups in rotation, each group's run in order, as
        -- the claim returns them.
        RETURN QUERY
        SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
               queue_name, m.message_id, m.sequence,
               m.group_id, m.client_id, m.metadata, skipq.topic_body(m.body, m.tags), m.body_binary, m.tags, m.sent_at,
               m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
               m.re_routed_from, m.dead_lettered_at
        FROM skipq.message_claim_grouped(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                                         max_messages_per_group, 9223372036854775807, 0, 'claim') m;
        RETURN;
    END IF;
    RETURN QUERY
    -- The handle as service/receipt.go encodes it (base64url, no padding;
    -- 48 bytes give 64 characters, under encode()'s 76 per line).
    SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
           queue_name, m.message_id, m.sequence,
           NULL::text, m.client_id, m.metadata, skipq.topic_body(m.body, m.tags), m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0) m
    ORDER BY m.sequence;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handle text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
    PERFORM skipq.wake_groups(ARRAY[a.queue_id], ARRAY[a.group_id]);
END $$;
-- +goose StatementEnd

-- (Replaced through EXECUTE for the reason 00012 created it so: sqlc stops
-- at a second definition of skipq.ack.)
-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE $sql$
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handles text[]) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
    PERFORM skipq.wake_groups(a.q, a.g);
    RETURN a.n;
END $$;
$sql$;
END $do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.try_ack(receipt_handles text[]) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
    PERFORM skipq.wake_groups(a.q, a.g);
    -- A handle settled if its message went with its token (a stale handle
    -- of the same message, given next to the live one, did not).
    RETURN QUERY
    SELECT u.h FROM unnest(k.h, k.q, k.s, k.t) AS u(h, q, s, t)
    WHERE EXISTS (SELECT 1 FROM unnest(a.q, a.s, a.t) AS x(q, s, t)
                  WHERE x.q = u.q AND x.s = u.s AND x.t = u.t);
END $$;
-- +goose StatementEnd
