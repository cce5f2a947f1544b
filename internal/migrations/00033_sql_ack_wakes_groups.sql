-- +goose Up
-- An ack through the SQL API that settles a FIFO group's head makes the
-- group receivable, so it wakes the group's queue at commit, as the HTTP
-- ack does (the node publishes its wake-up) and as skipq.nack and
-- skipq.send already do. Without it a receiver parked on any node got the
-- group's next message only at its hub's safety recheck, seconds later.
-- skipq.requeue, which woke only the queue it moves to, also wakes the
-- source queue when the message held a group there. An ack of a message
-- without a group makes nothing receivable and wakes nobody.
-- skipq.set_visibility ends a lease only with 0, which is a nack and
-- wakes already.
--
-- skipq.wake_groups is the one place that turns the settled messages'
-- groups into wake-ups: each queue once, counting its distinct groups
-- (each can hand out one more message).
-- +goose StatementBegin
CREATE FUNCTION skipq.wake_groups(p_queue_ids bigint[], p_group_ids text[]) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w record;
BEGIN
    SELECT array_agg(g.queue_id) AS q, array_agg(g.n) AS n INTO w
    FROM (SELECT u.queue_id, count(DISTINCT u.group_id)::integer AS n
          FROM unnest(p_queue_ids, p_group_ids) AS u(queue_id, group_id)
          WHERE u.group_id IS NOT NULL
          GROUP BY u.queue_id) g;
    IF w.q IS NOT NULL THEN
        -- "sql" is never a node id: every node wakes its waiters.
        PERFORM skipq.wake('sql', w.q, w.n);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.wake_groups(bigint[], text[]) FROM PUBLIC;

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.requeue(receipt_handle text, to_queue text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    m record;
    v_group text;
BEGIN
    PERFORM skipq.check_queue_name('to_queue', to_queue);
    r := skipq.receipt_parse(receipt_handle);
    -- The group it leaves, read before the move.
    SELECT x.group_id INTO v_group FROM skipq.messages x
    WHERE x.queue_id = r.queue_id AND x.sequence = r.sequence AND x.lease_token = r.token;
    SELECT * INTO m FROM skipq.message_requeue(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence],
                                               ARRAY[r.token], to_queue, skipq.limit_setting('max_receive_count', 1024));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    PERFORM skipq.wake('sql', ARRAY[m.destination_queue_id], ARRAY[1]);
    PERFORM skipq.wake_groups(ARRAY[r.queue_id], ARRAY[v_group]);
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.requeue(receipt_handle text, to_queue text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    m record;
BEGIN
    PERFORM skipq.check_queue_name('to_queue', to_queue);
    r := skipq.receipt_parse(receipt_handle);
    SELECT * INTO m FROM skipq.message_requeue(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence],
                                               ARRAY[r.token], to_queue, skipq.limit_setting('max_receive_count', 1024));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    PERFORM skipq.wake('sql', ARRAY[m.destination_queue_id], ARRAY[1]);
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handle text) RETURNS void
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
-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE $sql$
CREATE OR REPLACE FUNCTION skipq.ack(receipt_handles text[]) RETURNS integer
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.try_ack(receipt_handles text[]) RETURNS SETOF text
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
DROP FUNCTION skipq.wake_groups(bigint[], text[]);
