-- +goose Up
-- A FIFO receive passes a group whose first message a transaction outside
-- skipq holds: skipq.message_claim_grouped locks each group's head while it
-- walks the groups, so such a group no longer takes one of the walk's
-- places (a receive of one message answered empty while other groups were
-- ready). Same signature: the previous release's nodes call it unchanged.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint DEFAULT NULL::bigint) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    q        skipq.queues;
    v_groups text[];
    v_heads  bigint[];
    v_now    timestamptz;
    v_until  timestamptz;
    v_seqs   bigint[];
    v_taken  text[];
    v_retain integer;
BEGIN
    -- A receive on a FIFO queue (p_mode 'claim', 'delete' for autoAck,
    -- 'peek'): up to p_max_messages messages, at most p_max_per_group from
    -- each receivable group, groups in rotation order, within the response
    -- budget (skipq.message_wire_size, the group id and p_message_overhead
    -- per message; the first always fits). Rows come back in answer order.
    -- Statement 1 locks the receivable groups' rows (SKIP LOCKED) with their
    -- heads; statement 2 locks each group's run of messages; a claim then
    -- leases the groups and moves them to the back of the rotation, an
    -- autoAck releases them. On a traced queue each message gets its
    -- 'received' event (and 'acked' for autoAck), under p_key_id.
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT array_agg(s.group_id ORDER BY s.turn), array_agg(s.head ORDER BY s.turn) INTO v_groups, v_heads
    FROM (SELECT g.group_id, g.turn, h.sequence AS head
          FROM skipq.message_groups g
          CROSS JOIN LATERAL (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                              WHERE (h.queue_id::text || '/' || h.group_id) = (g.queue_id::text || '/' || g.group_id)
                                AND h.group_id IS NOT NULL
                              ORDER BY h.sequence LIMIT 1) h
          -- The head itself, locked here, where a group counts towards the
          -- LIMIT: a head held by a transaction outside (an application's
          -- FOR UPDATE) drops its group from the walk, which goes on to the
          -- next; locked only in statement 2, it took one of the LIMIT's
          -- places and a receive of one answered empty with other groups
          -- ready. Two claims never split a group: each locks the head
          -- before the group row, so whoever holds the head has the group.
          CROSS JOIN LATERAL (SELECT 1 FROM skipq.messages l
                              WHERE l.queue_id = g.queue_id AND l.sequence = h.sequence
                              FOR UPDATE SKIP LOCKED) l
          WHERE g.queue_id = q.id
            AND g.leased_until <= coalesce(p_now, clock_timestamp())
            AND h.ready AND (h.expires_at IS NULL OR h.expires_at > coalesce(p_now, clock_timestamp()))
          ORDER BY g.turn
          LIMIT p_max_messages
          FOR NO KEY UPDATE OF g SKIP LOCKED) s;
    IF v_groups IS NULL THEN
        RETURN;
    END IF;

    WITH t AS MATERIALIZED (
        SELECT coalesce(p_now, clock_timestamp()) AS now
    ), run AS (
        -- One message a group: its first, found by statement 1.
        SELECT x.ord, x.head AS sequence, 1::bigint AS rn
        FROM unnest(v_heads) WITH ORDINALITY AS x(head, ord)
        WHERE p_max_per_group = 1
        UNION ALL
        SELECT x.ord, r.sequence, r.rn
        FROM unnest(v_groups) WITH ORDINALITY AS x(group_id, ord)
        CROSS JOIN LATERAL (
            SELECT h.sequence, row_number() OVER w AS rn,
                   bool_and(h.ready AND (h.expires_at IS NULL OR h.expires_at > (SELECT t.now FROM t))) OVER w AS ok
            FROM (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                  WHERE (h.queue_id::text || '/' || h.group_id) = (q.id::text || '/' || x.group_id)
                    AND h.group_id IS NOT NULL
                  ORDER BY h.sequence LIMIT p_max_per_group) h
            WINDOW w AS (ORDER BY h.sequence ROWS UNBOUNDED PRECEDING)) r
        WHERE r.ok AND p_max_per_group > 1
    ), locked AS (
        SELECT r.ord, r.rn, c.sequence, c.size
        FROM run r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + octet_length(c.group_id) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = q.id AND c.sequence = r.sequence
              AND c.ready AND (c.expires_at IS NULL OR c.expires_at > (SELECT t.now FROM t))
            FOR UPDATE SKIP LOCKED) c
    ), kept AS (
        SELECT l.ord, l.sequence, l.size
        FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
        WHERE l.k = l.rn
    ), picked AS (
        SELECT w.ord, w.sequence FROM (
            SELECT w.ord, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM kept w
            WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
    )
    SELECT (SELECT t.now FROM t), array_agg(p.sequence ORDER BY p.ord, p.sequence),
           array_agg(DISTINCT v_groups[p.ord])
    INTO v_now, v_seqs, v_taken
    FROM picked p;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;

    IF p_mode = 'peek' THEN
        RETURN QUERY
        SELECT m.* FROM unnest(v_seqs) WITH ORDINALITY AS s(sequence, n)
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m WHERE m.queue_id = q.id AND m.sequence = s.sequence) m
        ORDER BY s.n;
        RETURN;
    END IF;

    v_until := v_now + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
    UPDATE skipq.message_groups g
    SET turn = nextval('skipq.group_turn'),
        leased_until = CASE WHEN p_mode = 'claim' THEN v_until ELSE g.leased_until END
    WHERE g.queue_id = q.id AND g.group_id = ANY(v_taken);

    IF p_mode = 'delete' THEN
        SELECT x.seconds INTO v_retain FROM skipq.queue_retention x WHERE x.queue_id = q.id;
    END IF;
    IF p_mode = 'claim' THEN
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT v_until, q.id, s.sequence FROM unnest(v_seqs) AS s(sequence)
        ), claimed AS (
            UPDATE skipq.messages m
            SET visible_at        = v_until,
                receive_count     = m.receive_count + 1,
                first_received_at = coalesce(m.first_received_at, v_now),
                lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
                ready             = false
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM claimed r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM claimed c ORDER BY array_position(v_seqs, c.sequence);
    ELSIF v_retain IS NOT NULL THEN
        -- autoAck on a queue that keeps acked messages (message_claim_and_delete).
        RETURN QUERY
        WITH retained AS (
            SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
                array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true)
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM retained r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT r.* FROM retained r ORDER BY array_position(v_seqs, r.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    ELSE
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), gone AS (
            DELETE FROM skipq.messages m
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   CASE WHEN e.n = 2 THEN v_now END
            FROM gone r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM gone c ORDER BY array_position(v_seqs, c.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint) FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint DEFAULT NULL::bigint) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    q        skipq.queues;
    v_groups text[];
    v_heads  bigint[];
    v_now    timestamptz;
    v_until  timestamptz;
    v_seqs   bigint[];
    v_taken  text[];
    v_retain integer;
BEGIN
    -- A receive on a FIFO queue (p_mode 'claim', 'delete' for autoAck,
    -- 'peek'): up to p_max_messages messages, at most p_max_per_group from
    -- each receivable group, groups in rotation order, within the response
    -- budget (skipq.message_wire_size, the group id and p_message_overhead
    -- per message; the first always fits). Rows come back in answer order.
    -- Statement 1 locks the receivable groups' rows (SKIP LOCKED) with their
    -- heads; statement 2 locks each group's run of messages; a claim then
    -- leases the groups and moves them to the back of the rotation, an
    -- autoAck releases them. On a traced queue each message gets its
    -- 'received' event (and 'acked' for autoAck), under p_key_id.
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT array_agg(s.group_id ORDER BY s.turn), array_agg(s.head ORDER BY s.turn) INTO v_groups, v_heads
    FROM (SELECT g.group_id, g.turn, h.sequence AS head
          FROM skipq.message_groups g
          CROSS JOIN LATERAL (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                              WHERE (h.queue_id::text || '/' || h.group_id) = (g.queue_id::text || '/' || g.group_id)
                                AND h.group_id IS NOT NULL
                              ORDER BY h.sequence LIMIT 1) h
          WHERE g.queue_id = q.id
            AND g.leased_until <= coalesce(p_now, clock_timestamp())
            AND h.ready AND (h.expires_at IS NULL OR h.expires_at > coalesce(p_now, clock_timestamp()))
          ORDER BY g.turn
          LIMIT p_max_messages
          FOR NO KEY UPDATE OF g SKIP LOCKED) s;
    IF v_groups IS NULL THEN
        RETURN;
    END IF;

    WITH t AS MATERIALIZED (
        SELECT coalesce(p_now, clock_timestamp()) AS now
    ), run AS (
        -- One message a group: its first, found by statement 1.
        SELECT x.ord, x.head AS sequence, 1::bigint AS rn
        FROM unnest(v_heads) WITH ORDINALITY AS x(head, ord)
        WHERE p_max_per_group = 1
        UNION ALL
        SELECT x.ord, r.sequence, r.rn
        FROM unnest(v_groups) WITH ORDINALITY AS x(group_id, ord)
        CROSS JOIN LATERAL (
            SELECT h.sequence, row_number() OVER w AS rn,
                   bool_and(h.ready AND (h.expires_at IS NULL OR h.expires_at > (SELECT t.now FROM t))) OVER w AS ok
            FROM (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                  WHERE (h.queue_id::text || '/' || h.group_id) = (q.id::text || '/' || x.group_id)
                    AND h.group_id IS NOT NULL
                  ORDER BY h.sequence LIMIT p_max_per_group) h
            WINDOW w AS (ORDER BY h.sequence ROWS UNBOUNDED PRECEDING)) r
        WHERE r.ok AND p_max_per_group > 1
    ), locked AS (
        SELECT r.ord, r.rn, c.sequence, c.size
        FROM run r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + octet_length(c.group_id) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = q.id AND c.sequence = r.sequence
              AND c.ready AND (c.expires_at IS NULL OR c.expires_at > (SELECT t.now FROM t))
            FOR UPDATE SKIP LOCKED) c
    ), kept AS (
        SELECT l.ord, l.sequence, l.size
        FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
        WHERE l.k = l.rn
    ), picked AS (
        SELECT w.ord, w.sequence FROM (
            SELECT w.ord, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM kept w
            WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
    )
    SELECT (SELECT t.now FROM t), array_agg(p.sequence ORDER BY p.ord, p.sequence),
           array_agg(DISTINCT v_groups[p.ord])
    INTO v_now, v_seqs, v_taken
    FROM picked p;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;

    IF p_mode = 'peek' THEN
        RETURN QUERY
        SELECT m.* FROM unnest(v_seqs) WITH ORDINALITY AS s(sequence, n)
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m WHERE m.queue_id = q.id AND m.sequence = s.sequence) m
        ORDER BY s.n;
        RETURN;
    END IF;

    v_until := v_now + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
    UPDATE skipq.message_groups g
    SET turn = nextval('skipq.group_turn'),
        leased_until = CASE WHEN p_mode = 'claim' THEN v_until ELSE g.leased_until END
    WHERE g.queue_id = q.id AND g.group_id = ANY(v_taken);

    IF p_mode = 'delete' THEN
        SELECT x.seconds INTO v_retain FROM skipq.queue_retention x WHERE x.queue_id = q.id;
    END IF;
    IF p_mode = 'claim' THEN
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT v_until, q.id, s.sequence FROM unnest(v_seqs) AS s(sequence)
        ), claimed AS (
            UPDATE skipq.messages m
            SET visible_at        = v_until,
                receive_count     = m.receive_count + 1,
                first_received_at = coalesce(m.first_received_at, v_now),
                lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
                ready             = false
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM claimed r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM claimed c ORDER BY array_position(v_seqs, c.sequence);
    ELSIF v_retain IS NOT NULL THEN
        -- autoAck on a queue that keeps acked messages (message_claim_and_delete).
        RETURN QUERY
        WITH retained AS (
            SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
                array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true)
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM retained r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT r.* FROM retained r ORDER BY array_position(v_seqs, r.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    ELSE
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), gone AS (
            DELETE FROM skipq.messages m
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   CASE WHEN e.n = 2 THEN v_now END
            FROM gone r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM gone c ORDER BY array_position(v_seqs, c.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint) FROM PUBLIC;
