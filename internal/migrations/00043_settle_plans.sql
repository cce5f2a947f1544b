-- +goose Up
-- Settle statements whose cost no longer depends on the statistics their
-- plans were made with (docs/DESIGN.md, "Settling by address").
--
-- skipq.message_ack deleted the acked messages with a join of the handles
-- to skipq.messages by key. Its plan is generic and kept for a
-- connection's life; made while the table's statistics said it was nearly
-- empty (20,000 messages sent and acked, one delayed message left, then
-- VACUUM ANALYZE: one live row over 572 pages), it walked the whole of
-- messages_pkey as the join's outer side with the handles as a join
-- filter, and kept doing so once a backlog had built up: an ack of 100
-- read 57,521 buffers (2.2 s) behind 28,000 messages, one of 4,096 ran
-- for 100 s. A probe by key is no cure by itself: on such statistics every
-- index that leads with queue_id costs the same, and messages_queue_sent_idx
-- walks all of a queue's messages. So each row is now found by a probe
-- that only the primary key serves (its sequence as both ends of a range
-- within its queue, in sequence order, with sorts off) and deleted at that
-- address: a TID scan is the statement's only plan. A TID scan checks the
-- address again on a row that changed meanwhile, and the newest version
-- has another, so a row that a transaction the delete waited for changed
-- (an extension, which keeps the token) is settled by a second pass with
-- a fresh snapshot, run only when not every handle settled in the first.
-- The retained ack locks its rows by the same probe, and
-- skipq.message_retain updates the locked rows at their addresses.
--
-- Signatures and results are unchanged; the Down restores the previous
-- bodies.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_ack(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_key_ids bigint[] DEFAULT NULL::bigint[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF skipq.messages
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
    v_retain boolean;
    v_gq     bigint[];
    v_gg     text[];
    v_rq     bigint[];
    v_rs     bigint[];
    v_rt     integer[];
    v_again  boolean := false;
    v_acked  integer := 0;
    v_n      integer;
BEGIN
    -- Acks receipts (p_queue_ids, p_sequences, p_tokens: the handles'
    -- parts): deletes each message whose lease the token still holds, or
    -- retains it on a queue with retainAckedSeconds (skipq.message_retain),
    -- releases the FIFO groups left with nothing in flight, and returns the
    -- rows acked. On a traced queue each gets its 'acked' event under its
    -- handle's API key (p_key_ids), gone at once unless retained.
    v_retain := EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = ANY(p_queue_ids));
    -- The groups of FIFO messages, read before they change. Each message
    -- by a range probe that only the primary key serves in its order (sorts
    -- are off), its key checked after: a plain join by key is flattened,
    -- and on statistics that say "one row" was planned as a walk of every
    -- grouped message per handle; a probe by key could as well walk
    -- messages_queue_sent_idx over all of the queue's messages.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence, m.group_id, m.lease_token FROM skipq.messages m
                            WHERE (m.queue_id, m.sequence) >= (k.queue_id, k.sequence)
                            ORDER BY m.queue_id, m.sequence LIMIT 1) m
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.group_id IS NOT NULL;
    END IF;
    -- The rows the handles hold are deleted by address (DESIGN.md,
    -- "Settling by address"): each found by a probe that only the primary
    -- key serves (its sequence as both ends of a range within its queue,
    -- in sequence order, sorts off), its token and queue checked there; a
    -- TID scan is the delete's only plan (a condition the messages' indexes
    -- could serve, such as queue_id = ANY(...), would give it others).
    -- Joined to the handles by key, a plan made on drained statistics
    -- walked the whole primary key per call. A TID scan checks the address
    -- again when the row changed meanwhile (a transaction this one waited
    -- for committed a new version of it), and the newest version has
    -- another: such a row is left, locked, and a second pass, whose
    -- snapshot sees the newest version, settles it if a handle still holds
    -- it. The second pass leaves ready rows alone: one that the worker
    -- added while the first pass waited for it stays for the worker's
    -- sweep, as the first pass's snapshot decided.
    LOOP
        RETURN QUERY
        WITH gone AS (
            DELETE FROM skipq.messages m
            WHERE m.ctid = ANY(ARRAY(
                    SELECT x.ctid FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
                    CROSS JOIN LATERAL (SELECT x.ctid, x.lease_token FROM skipq.messages x
                                        WHERE x.queue_id = k.queue_id
                                          AND x.sequence >= k.sequence AND x.sequence <= k.sequence
                                        ORDER BY x.sequence LIMIT 1) x
                    WHERE x.lease_token = k.token
                      AND k.queue_id = ANY(ARRAY(SELECT q.id FROM skipq.queues q WHERE q.id = ANY(p_queue_ids)))))
              AND (NOT v_retain OR NOT EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = m.queue_id))
            RETURNING m.*
        ), unready AS (
            DELETE FROM skipq.ready r
            WHERE r.ctid = ANY(ARRAY(
                SELECT x.ctid FROM gone g
                CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                    WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence OFFSET 0) x
                WHERE g.ready AND NOT v_again))
        ), keys AS (
            -- Each handle's API key by its message's sequence (unique across
            -- queues); read, and so built, only for traced rows.
            SELECT jsonb_object_agg(u.s::text, u.k) AS map
            FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, 'acked', coalesce(p_now, now()),
                   (SELECT (k.map->>g.sequence::text)::bigint FROM keys k), NULL, coalesce(p_now, now())
            FROM gone g WHERE g.tags ? 'skipq.trace'
        )
        SELECT gone.* FROM gone;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_acked := v_acked + v_n;
        -- Every handle settled (the common case), or this was the second pass.
        EXIT WHEN v_again OR v_acked >= cardinality(p_sequences);
        v_again := true;
    END LOOP;
    IF v_retain THEN
        -- FOR UPDATE rechecks the token on the row's latest version: of two
        -- acks of one receipt, the second finds the empty token and
        -- matches nothing. Each row by the probe above, which the lock
        -- rechecks on the newest version (a TID scan would not find that
        -- version) and which locks no other row.
        SELECT array_agg(m.queue_id), array_agg(m.sequence), array_agg(k.seconds) INTO v_rq, v_rs, v_rt
        FROM (SELECT u.queue_id, u.sequence, u.token, r.seconds
              FROM unnest(p_queue_ids, p_sequences, p_tokens) AS u(queue_id, sequence, token)
              CROSS JOIN LATERAL (SELECT r.seconds FROM skipq.queue_retention r
                                  WHERE r.queue_id = u.queue_id
                                    AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = r.queue_id)) r) k
        CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id
                              AND m.sequence >= k.sequence AND m.sequence <= k.sequence
                              AND m.lease_token = k.token
                            ORDER BY m.sequence LIMIT 1
                            FOR UPDATE) m;
        IF v_rq IS NOT NULL THEN
            -- A retained message is gone when its retention ends (MessageDeleteExpired).
            RETURN QUERY
            WITH r AS (
                SELECT * FROM skipq.message_retain(v_rq, v_rs, v_rt, clock_timestamp(), false)
            ), keys AS (
            -- Each handle's API key by its message's sequence (unique across
            -- queues); read, and so built, only for traced rows.
            SELECT jsonb_object_agg(u.s::text, u.k) AS map
            FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
        ), traced AS (
                INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
                SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'acked', coalesce(p_now, now()),
                       (SELECT (k.map->>r.sequence::text)::bigint FROM keys k), NULL, NULL
                FROM r WHERE r.tags ? 'skipq.trace'
            )
            SELECT * FROM r;
        END IF;
    END IF;
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_retain(p_queue_ids bigint[], p_sequences bigint[], p_seconds integer[], p_now timestamp with time zone, p_delivered boolean) RETURNS SETOF skipq.messages
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
BEGIN
    -- The callers hold the rows locked (the ack locks them, a claim has
    -- just updated them), so each is updated at the address that a probe
    -- only the primary key serves found (DESIGN.md, "Settling by
    -- address"): a TID scan is the only plan. Joined by key, a plan made on drained statistics could walk
    -- the whole table.
    RETURN QUERY
    WITH kept AS (
        UPDATE skipq.messages m
        SET visible_at        = p_now + make_interval(secs => k.seconds),
            expires_at        = p_now + make_interval(secs => k.seconds),
            lease_token       = '\x'::bytea,
            ready             = false,
            group_id          = NULL,
            dead_lettered_at  = NULL,
            tags              = m.tags || jsonb_build_object('skipq.acked',
                                    jsonb_build_object('at', p_now, 'g', m.group_id)::text),
            receive_count     = m.receive_count + CASE WHEN p_delivered THEN 1 ELSE 0 END,
            first_received_at = CASE WHEN p_delivered THEN coalesce(m.first_received_at, p_now)
                                     ELSE m.first_received_at END
        FROM (SELECT o.ctid AS row, o.o, k.seconds
              FROM unnest(p_queue_ids, p_sequences, p_seconds) AS k(queue_id, sequence, seconds)
              CROSS JOIN LATERAL (SELECT o.ctid, o FROM skipq.messages o
                                  WHERE o.queue_id = k.queue_id
                                    AND o.sequence >= k.sequence AND o.sequence <= k.sequence
                                  ORDER BY o.sequence LIMIT 1) o) k
        WHERE m.ctid = k.row
        RETURNING (k.o).*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM kept g
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence) x))
    )
    SELECT kept.* FROM kept;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_ack(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_key_ids bigint[] DEFAULT NULL::bigint[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF skipq.messages
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
    v_retain boolean;
    v_gq     bigint[];
    v_gg     text[];
    v_rq     bigint[];
    v_rs     bigint[];
    v_rt     integer[];
BEGIN
    -- Acks receipts (p_queue_ids, p_sequences, p_tokens: the handles'
    -- parts): deletes each message whose lease the token still holds, or
    -- retains it on a queue with retainAckedSeconds (skipq.message_retain),
    -- releases the FIFO groups left with nothing in flight, and returns the
    -- rows acked. On a traced queue each gets its 'acked' event under its
    -- handle's API key (p_key_ids), gone at once unless retained.
    v_retain := EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = ANY(p_queue_ids));
    -- The groups of FIFO messages, read before they change. Each message
    -- by a range probe that only the primary key serves in its order (sorts
    -- are off), its key checked after: a plain join by key is flattened,
    -- and on statistics that say "one row" was planned as a walk of every
    -- grouped message per handle; a probe by key could as well walk
    -- messages_queue_sent_idx over all of the queue's messages.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence, m.group_id, m.lease_token FROM skipq.messages m
                            WHERE (m.queue_id, m.sequence) >= (k.queue_id, k.sequence)
                            ORDER BY m.queue_id, m.sequence LIMIT 1) m
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.group_id IS NOT NULL;
    END IF;
    RETURN QUERY
    WITH gone AS (
        DELETE FROM skipq.messages m
        USING (SELECT unnest(p_queue_ids::bigint[]) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
          AND (NOT v_retain OR NOT EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = m.queue_id))
        RETURNING m.*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM gone g
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence) x WHERE g.ready))
    ), keys AS (
        -- Each handle's API key by its message's sequence (unique across
        -- queues); read, and so built, only for traced rows.
        SELECT jsonb_object_agg(u.s::text, u.k) AS map
        FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, 'acked', coalesce(p_now, now()),
               (SELECT (k.map->>g.sequence::text)::bigint FROM keys k), NULL, coalesce(p_now, now())
        FROM gone g WHERE g.tags ? 'skipq.trace'
    )
    SELECT gone.* FROM gone;
    IF v_retain THEN
        -- FOR UPDATE rechecks the token on the row's latest version: of two
        -- acks of one receipt, the second finds the empty token and
        -- matches nothing.
        SELECT array_agg(m.queue_id), array_agg(m.sequence), array_agg(k.seconds) INTO v_rq, v_rs, v_rt
        FROM (SELECT u.queue_id, u.sequence, u.token, r.seconds
              FROM unnest(p_queue_ids, p_sequences, p_tokens) AS u(queue_id, sequence, token)
              CROSS JOIN LATERAL (SELECT r.seconds FROM skipq.queue_retention r
                                  WHERE r.queue_id = u.queue_id
                                    AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = r.queue_id)) r) k
        CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                            FOR UPDATE) m;
        IF v_rq IS NOT NULL THEN
            -- A retained message is gone when its retention ends (MessageDeleteExpired).
            RETURN QUERY
            WITH r AS (
                SELECT * FROM skipq.message_retain(v_rq, v_rs, v_rt, clock_timestamp(), false)
            ), keys AS (
            -- Each handle's API key by its message's sequence (unique across
            -- queues); read, and so built, only for traced rows.
            SELECT jsonb_object_agg(u.s::text, u.k) AS map
            FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
        ), traced AS (
                INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
                SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'acked', coalesce(p_now, now()),
                       (SELECT (k.map->>r.sequence::text)::bigint FROM keys k), NULL, NULL
                FROM r WHERE r.tags ? 'skipq.trace'
            )
            SELECT * FROM r;
        END IF;
    END IF;
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_retain(p_queue_ids bigint[], p_sequences bigint[], p_seconds integer[], p_now timestamp with time zone, p_delivered boolean) RETURNS SETOF skipq.messages
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
BEGIN
    RETURN QUERY
    WITH kept AS (
        UPDATE skipq.messages m
        SET visible_at        = p_now + make_interval(secs => k.seconds),
            expires_at        = p_now + make_interval(secs => k.seconds),
            lease_token       = '\x'::bytea,
            ready             = false,
            group_id          = NULL,
            dead_lettered_at  = NULL,
            tags              = m.tags || jsonb_build_object('skipq.acked',
                                    jsonb_build_object('at', p_now, 'g', m.group_id)::text),
            receive_count     = m.receive_count + CASE WHEN p_delivered THEN 1 ELSE 0 END,
            first_received_at = CASE WHEN p_delivered THEN coalesce(m.first_received_at, p_now)
                                     ELSE m.first_received_at END
        FROM unnest(p_queue_ids, p_sequences, p_seconds) AS k(queue_id, sequence, seconds)
        CROSS JOIN LATERAL (SELECT o FROM skipq.messages o
                            WHERE o.queue_id = k.queue_id AND o.sequence = k.sequence) o
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence
        RETURNING (o.o).*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM kept g
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence) x))
    )
    SELECT kept.* FROM kept;
END $$;
-- +goose StatementEnd
