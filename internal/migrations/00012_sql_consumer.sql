-- +goose Up
-- The SQL consumer API (SPEC-SQL-CONSUMER.md, §13), first part: receive,
-- ack (one handle, or a list all or nothing), try_ack and extending a
-- lease, inside the caller's transaction. Each is a thin wrapper over the
-- functions the HTTP API calls (skipq.message_claim, skipq.message_ack,
-- skipq.message_set_visibility; migration 00011): one implementation of
-- the claim and of each settle. Receipt handles are the HTTP API's, so a
-- handle received over HTTP settles here and the other way round.
--
-- A settle that changes nothing raises SQLSTATE SQ404 (skipq:
-- receipt_stale): it aborts the caller's transaction, and with it the work
-- done for a delivery that is no longer current -- of all deliveries of a
-- message, at most one delivery's work commits. A malformed or forged
-- handle is SQ404 too, as over HTTP. Time is read at the call
-- (clock_timestamp()), not at the transaction's start: a lease taken late
-- in a long transaction lasts its full length.

-- receipt_parse decodes one handle (service/receipt.go's format: base64url
-- without padding of queue id, sequence and the 32-byte lease token), or
-- raises SQ404.
-- +goose StatementBegin
CREATE FUNCTION skipq.receipt_parse(p_handle text, OUT queue_id bigint, OUT sequence bigint, OUT token bytea)
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b bytea;
BEGIN
    -- The only shape a handle has: 64 characters of the base64url alphabet
    -- (decode() would skip whitespace). Checked without a regular
    -- expression: matching ^[A-Za-z0-9_-]{64}$ cost about 20 us a handle,
    -- most of a list ack. receipts_parse checks the same.
    IF p_handle IS NULL OR NOT (octet_length(p_handle) = 64 AND ltrim(p_handle, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_') = '') THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404',
            DETAIL = 'not a receipt handle this server issued';
    END IF;
    b := decode(translate(p_handle, '-_', '+/'), 'base64');
    queue_id := ('x' || encode(substr(b, 1, 8), 'hex'))::bit(64)::bigint;
    sequence := ('x' || encode(substr(b, 9, 8), 'hex'))::bit(64)::bigint;
    token := substr(b, 17, 32);
END $$;
-- +goose StatementEnd

-- receipts_parse decodes a list: the well-formed handles, first copies only,
-- in (queue, sequence) order -- the order every list settle locks rows in,
-- so two of them cannot deadlock. Set-based (receipt_parse's rules, without
-- a function call per handle).
-- +goose StatementBegin
CREATE FUNCTION skipq.receipts_parse(p_handles text[])
RETURNS TABLE (handle text, queue_id bigint, sequence bigint, token bytea)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT DISTINCT ON (k.queue_id, k.sequence, k.token) k.h, k.queue_id, k.sequence, k.token
    FROM (SELECT h.h, h.n,
                 ('x' || encode(substr(d.b, 1, 8), 'hex'))::bit(64)::bigint AS queue_id,
                 ('x' || encode(substr(d.b, 9, 8), 'hex'))::bit(64)::bigint AS sequence,
                 substr(d.b, 17, 32) AS token
          FROM unnest(p_handles) WITH ORDINALITY AS h(h, n)
          -- OFFSET 0: decoded once per handle, not once per use of b.
          CROSS JOIN LATERAL (SELECT CASE WHEN octet_length(h.h) = 64 AND ltrim(h.h,
                                              'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_') = ''
                                          THEN decode(translate(h.h, '-_', '+/'), 'base64') END AS b OFFSET 0) d
          WHERE d.b IS NOT NULL) k
    ORDER BY k.queue_id, k.sequence, k.token, k.n
$$;
-- +goose StatementEnd

-- skipq.receive claims like an HTTP receive (the same function, which
-- reads the time at the claim itself: clock_timestamp()), for
-- visibility_seconds (NULL: the queue's default), and returns the messages
-- in sequence order with their receipt handles; no rows for a queue that
-- does not exist. There is no response budget: rows are not JSON.
-- max_messages_per_group is for FIFO queues (not yet built); 1 or more.
-- Inside a transaction, the claimed rows stay locked until it ends, and a
-- rollback undoes the delivery, receive count included (docs/SQL.md).
-- +goose StatementBegin
CREATE FUNCTION skipq.receive(
    queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL,
    max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default')
RETURNS TABLE (receipt_handle text, queue text, message_id text, sequence bigint,
               group_id text, client_id text, metadata text, body bytea, body_is_binary boolean,
               tags jsonb, sent_at timestamptz, first_received_at timestamptz,
               receive_count integer, visible_until timestamptz, delayed_to timestamptz,
               expires_at timestamptz, re_routed_from text, dead_lettered_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM skipq.check(receive.tenant IS NOT NULL AND receive.tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue_name', queue_name);
    PERFORM skipq.check(max_messages BETWEEN 1 AND 1024, 'max_messages must be between 1 and 1024');
    PERFORM skipq.check(visibility_seconds IS NULL OR visibility_seconds BETWEEN 1 AND 43200,
                        'visibility_seconds must be between 1 and 43200');
    PERFORM skipq.check(max_messages_per_group >= 1, 'max_messages_per_group must be at least 1');
    RETURN QUERY
    -- The handle as service/receipt.go encodes it (base64url, no padding;
    -- 48 bytes give 64 characters, under encode()'s 76 per line).
    SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
           queue_name, m.message_id, m.sequence,
           NULL::text, m.client_id, m.metadata, m.body, m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0) m
    ORDER BY m.sequence;
END $$;
-- +goose StatementEnd

-- skipq.ack settles one delivery, or raises SQ404.
-- +goose StatementBegin
CREATE FUNCTION skipq.ack(receipt_handle text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
BEGIN
    r := skipq.receipt_parse(receipt_handle);
    PERFORM 1 FROM skipq.message_ack(ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token]);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
END $$;
-- +goose StatementEnd

-- skipq.ack of a list settles every delivery or none: one handle that
-- settles nothing (stale, forged, malformed, or given twice) raises SQ404,
-- which undoes the others with the caller's transaction. Returns how many
-- it settled (all of them).
-- (Created through EXECUTE only because sqlc, which reads these files for
-- the tables' shapes, takes an overload differing by an array argument for
-- a second definition of skipq.ack and stops.)
-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE $sql$
CREATE FUNCTION skipq.ack(receipt_handles text[]) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k record;
    n integer;
BEGIN
    PERFORM skipq.check(receipt_handles IS NOT NULL AND cardinality(receipt_handles) BETWEEN 1 AND 1024,
                        'receipt_handles must hold 1 to 1024 handles');
    SELECT array_agg(p.queue_id ORDER BY p.queue_id, p.sequence) AS q,
           array_agg(p.sequence ORDER BY p.queue_id, p.sequence) AS s,
           array_agg(p.token ORDER BY p.queue_id, p.sequence) AS t
    INTO k FROM skipq.receipts_parse(receipt_handles) p;
    SELECT count(*) INTO n FROM skipq.message_ack(k.q, k.s, k.t);
    IF n <> cardinality(receipt_handles) THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404',
            DETAIL = format('%s of %s handles settled nothing', cardinality(receipt_handles) - n,
                            cardinality(receipt_handles));
    END IF;
    RETURN n;
END $$;
$sql$;
END $do$;
-- +goose StatementEnd

-- skipq.try_ack settles what it can and returns the handles that settled;
-- the others (stale, forged, malformed, repeated) are left out.
-- +goose StatementBegin
CREATE FUNCTION skipq.try_ack(receipt_handles text[]) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k record;
BEGIN
    PERFORM skipq.check(receipt_handles IS NOT NULL AND cardinality(receipt_handles) <= 1024,
                        'receipt_handles must hold at most 1024 handles');
    SELECT array_agg(p.handle ORDER BY p.queue_id, p.sequence) AS h,
           array_agg(p.queue_id ORDER BY p.queue_id, p.sequence) AS q,
           array_agg(p.sequence ORDER BY p.queue_id, p.sequence) AS s,
           array_agg(p.token ORDER BY p.queue_id, p.sequence) AS t
    INTO k FROM skipq.receipts_parse(receipt_handles) p;
    RETURN QUERY
    -- A handle settled if its message went with its token (a stale handle
    -- of the same message, given next to the live one, did not).
    WITH acked AS MATERIALIZED (
        SELECT a.queue_id, a.sequence, a.lease_token FROM skipq.message_ack(k.q, k.s, k.t) a)
    SELECT u.h FROM unnest(k.h, k.q, k.s, k.t) AS u(h, q, s, t)
    WHERE EXISTS (SELECT 1 FROM acked a WHERE a.queue_id = u.q AND a.sequence = u.s AND a.lease_token = u.t);
END $$;
-- +goose StatementEnd

-- skipq.set_visibility makes the lease end visibility_seconds (1 to 43200)
-- from the call; the handle stays valid. Returns the new end. A release
-- (0) is a nack, which the SQL API does not offer yet: 22023.
-- +goose StatementBegin
CREATE FUNCTION skipq.set_visibility(receipt_handle text, visibility_seconds integer) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    v_until timestamptz;
BEGIN
    PERFORM skipq.check(visibility_seconds BETWEEN 1 AND 43200,
                        'visibility_seconds must be between 1 and 43200 (a release, 0, is not offered in SQL yet)');
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

REVOKE ALL ON FUNCTION skipq.receipt_parse(text), skipq.receipts_parse(text[]),
    skipq.receive(text, integer, integer, integer, text),
    skipq.ack(text), skipq.ack(text[]), skipq.try_ack(text[]), skipq.set_visibility(text, integer)
    FROM PUBLIC;

-- skipq_consumer may receive and settle and nothing else: the functions run
-- with their owner's rights, and the role gets no access to the tables.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'skipq_consumer') THEN
        CREATE ROLE skipq_consumer NOLOGIN;
    END IF;
END $$;
-- +goose StatementEnd
GRANT USAGE ON SCHEMA skipq TO skipq_consumer;
GRANT EXECUTE ON FUNCTION skipq.receive(text, integer, integer, integer, text), skipq.ack(text),
    skipq.ack(text[]), skipq.try_ack(text[]), skipq.set_visibility(text, integer)
    TO skipq_consumer;

-- +goose Down
REVOKE ALL ON SCHEMA skipq FROM skipq_consumer;
DROP FUNCTION skipq.set_visibility(text, integer);
DROP FUNCTION skipq.try_ack(text[]);
DROP FUNCTION skipq.ack(text[]);
DROP FUNCTION skipq.ack(text);
DROP FUNCTION skipq.receive(text, integer, integer, integer, text);
DROP FUNCTION skipq.receipts_parse(text[]);
DROP FUNCTION skipq.receipt_parse(text);
