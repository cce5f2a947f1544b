-- +goose Up
-- Settle statements whose cost no longer depends on the statistics their
-- plans were made with (docs/DESIGN.md, "Settling by address").
--
-- skipq.message_ack deleted the acked messages with a join of the handles
-- to skipq.messages by key, and message_nack and message_set_visibility
-- updated them so. Their plans are generic and kept for a connection's
-- life; made while the table's statistics said it was nearly empty
-- (20,000 messages sent and acked, one delayed message left, then VACUUM
-- ANALYZE: one live row over 572 pages), each walked the whole of
-- messages_pkey as the join's outer side with the handles as a join
-- filter, and kept doing so once a backlog had built up: an ack, a nack
-- or an extension of 100 read 57,500-58,400 buffers (an ack 2.2 s) behind
-- 28,000 messages, an ack of 4,096 ran for 100 s. A probe by key is no
-- cure by itself: on such statistics every index that leads with queue_id
-- costs the same, and messages_queue_sent_idx walks all of a queue's
-- messages. So each handle's row is now found by a probe that only the
-- primary key serves (skipq.receipt_rows: the sequence as both ends of a
-- range within its queue, in sequence order, with sorts off) and changed
-- at that address: a TID scan is each statement's only plan. A TID scan
-- checks the address again on a row that changed meanwhile, and the
-- newest version has another, so a row that a transaction the statement
-- waited for changed (an extension, which keeps the token) is settled by
-- a second pass with a fresh snapshot, run only when not every handle
-- settled in the first. message_requeue moves its messages so too. The
-- retained ack locks its rows by the same probe; skipq.message_retain and
-- message_dead_letter, whose callers hold the rows locked, find them by
-- it (skipq.message_rows) and change them by address; and
-- message_set_visibility locks the FIFO group rows by such a probe of
-- message_groups_pkey before it extends their leases by address.
--
-- skipq.group_release (00041) locked each group row at the address its
-- range probe found. Such a lock does not follow a row that another
-- transaction changed meanwhile to its newest version (measured on
-- PostgreSQL 15.18: the TID scan's recheck compares the address), so a
-- settle that waited for, say, a release of the group's other message
-- passed the group over and left it leased with nothing in flight until
-- its lease ran out. It now locks by the bounded probe above, which the
-- lock rechecks on the newest version.
--
-- Signatures and results are unchanged; the Down restores the previous
-- bodies and drops skipq.receipt_rows and skipq.message_rows.

-- The rows that receipt handles (their parts, in arrays) hold: each row's
-- address and the position of its handle in the arrays, for the settle
-- statements to change it at that address (docs/DESIGN.md, "Settling by
-- address"). Each handle's row is found by a probe that only the primary
-- key serves: its sequence as both ends of a range within its queue, in
-- sequence order, which no other index gives without a sort (the callers
-- turn sorts off); its token is checked on the row found, and its queue
-- must exist. Inlined into the calling statement, so it reads that
-- statement's snapshot.
-- The rows that receipt handles (their parts, in arrays) hold: each row's
-- address and the position of its handle in the arrays, for the settle
-- statements to change it at that address (docs/DESIGN.md, "Settling by
-- address"). Each handle's row is found by a probe that only the primary
-- key serves: its sequence as both ends of a range within its queue, in
-- sequence order, which no other index gives without a sort (the callers
-- turn sorts off); its token is checked on the row found, and its queue
-- must exist. Inlined into the calling statement, so it reads that
-- statement's snapshot.
-- The rows that receipt handles (their parts, in arrays) hold: each row's
-- address and the position of its handle in the arrays, for the settle
-- statements to change it at that address (docs/DESIGN.md, "Settling by
-- address"). Each handle's row is found by a probe that only the primary
-- key serves: its sequence as both ends of a range within its queue, in
-- sequence order, which no other index gives without a sort (the callers
-- turn sorts off); its token is checked on the row found, and its queue
-- must exist. Inlined into the calling statement, so it reads that
-- statement's snapshot.
-- +goose StatementBegin
CREATE FUNCTION skipq.receipt_rows(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[])
    RETURNS TABLE(address tid, n bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT x.ctid, k.n
    FROM unnest(p_queue_ids, p_sequences, p_tokens) WITH ORDINALITY AS k(queue_id, sequence, token, n)
    CROSS JOIN LATERAL (SELECT x.ctid, x.lease_token FROM skipq.messages x
                        WHERE x.queue_id = k.queue_id
                          AND x.sequence >= k.sequence AND x.sequence <= k.sequence
                        ORDER BY x.sequence LIMIT 1) x
    WHERE x.lease_token = k.token
      AND k.queue_id = ANY(ARRAY(SELECT q.id FROM skipq.queues q WHERE q.id = ANY(p_queue_ids)))
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.receipt_rows(bigint[], bigint[], bytea[]) FROM PUBLIC;

-- The rows with the given keys (queue ids and sequences, in arrays): each
-- row's address and the position of its key, found by the probe of
-- skipq.receipt_rows, without a token. For rows that the calling
-- transaction holds locked, whose addresses stay theirs meanwhile.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_rows(p_queue_ids bigint[], p_sequences bigint[])
    RETURNS TABLE(address tid, n bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT x.ctid, k.n
    FROM unnest(p_queue_ids, p_sequences) WITH ORDINALITY AS k(queue_id, sequence, n)
    CROSS JOIN LATERAL (SELECT x.ctid FROM skipq.messages x
                        WHERE x.queue_id = k.queue_id
                          AND x.sequence >= k.sequence AND x.sequence <= k.sequence
                        ORDER BY x.sequence LIMIT 1) x
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_rows(bigint[], bigint[]) FROM PUBLIC;

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
    -- The rows the handles hold are deleted at their addresses
    -- (skipq.receipt_rows; DESIGN.md, "Settling by address"): a TID scan
    -- is the delete's only plan, where a join of the handles by key, planned
    -- on drained statistics, walked the whole primary key per call (and a
    -- condition the messages' indexes could serve, such as
    -- queue_id = ANY(...), would give it other plans). A TID scan checks
    -- the address again when the row changed meanwhile (a transaction this
    -- one waited for committed a new version of it), and the newest
    -- version has another: such a row is left, locked, and a second pass,
    -- whose snapshot sees the newest version, settles it if a handle still
    -- holds it. The second pass leaves ready rows alone: one that the
    -- worker added while the first pass waited for it stays for the
    -- worker's sweep, as the first pass's snapshot decided.
    LOOP
        RETURN QUERY
        WITH gone AS (
            DELETE FROM skipq.messages m
            WHERE m.ctid = ANY(ARRAY(SELECT k.address FROM skipq.receipt_rows(p_queue_ids, p_sequences, p_tokens) k))
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
    -- just updated them), so each is updated at its address
    -- (skipq.message_rows; DESIGN.md, "Settling by address"): a TID scan is
    -- the only plan, where a join by key, planned on drained statistics,
    -- could walk the whole table.

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
        FROM (SELECT r.address, o.o, p_seconds[r.n] AS seconds
              FROM skipq.message_rows(p_queue_ids, p_sequences) r
              CROSS JOIN LATERAL (SELECT o FROM skipq.messages o WHERE o.ctid = r.address OFFSET 0) o) k
        WHERE m.ctid = k.address
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_set_visibility(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_visibility_seconds integer[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS SETOF skipq.messages
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
    v_gq    bigint[];
    v_gg    text[];
    v_again boolean := false;
    v_done  integer := 0;
    v_n     integer;
    v_rows  tid[];
    v_until timestamptz[];
BEGIN
    -- Sets the visibility of receipts (the handles' parts) still leased by
    -- their tokens to now + p_visibility_seconds: extends a lease, or ends
    -- it with 0 (the timer makes the message ready again). A FIFO group's
    -- lease lasts as long as its longest message's. Returns the rows
    -- changed; on a traced queue each gets its 'extended' event under its
    -- handle's API key (p_key_ids).
    -- The groups of FIFO messages, read before they change (the group
    -- checked outside the probe: a condition on group_id in it would let
    -- messages_group_idx, partial on it, be walked instead).
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM skipq.receipt_rows(p_queue_ids, p_sequences, p_tokens) k
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m WHERE m.ctid = k.address OFFSET 0) m
        WHERE m.group_id IS NOT NULL;
    END IF;
    -- The rows the handles hold are changed at their addresses, in two
    -- passes, as skipq.message_ack deletes them (DESIGN.md, "Settling by
    -- address"): the TID join is the only plan, and a row that changed
    -- while the first pass waited for it is extended by the second if its
    -- handle still holds it, leaving a ready row the worker added meanwhile
    -- to the worker's sweep.
    LOOP
        RETURN QUERY
        WITH extended AS (
            UPDATE skipq.messages m
            SET visible_at = t.now + make_interval(secs => p_visibility_seconds[k.n]),
                ready = false
            FROM (SELECT coalesce(p_now, now()) AS now) t,
                 skipq.receipt_rows(p_queue_ids, p_sequences, p_tokens) k
            WHERE m.ctid = k.address
              -- A FIFO lease that ran out stays over: its group may be leased
              -- to another receiver already.
              AND (m.group_id IS NULL OR m.visible_at > t.now)
            RETURNING m.*
        ), unready AS (
            DELETE FROM skipq.ready r
            WHERE r.ctid = ANY(ARRAY(
                SELECT x.ctid FROM extended e
                CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                    WHERE y.queue_id = e.queue_id AND y.sequence = e.sequence OFFSET 0) x
                WHERE NOT v_again))
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT e.visible_at, e.queue_id, e.sequence FROM extended e
        ), keys AS (
            -- Each handle's API key by its message's sequence (unique across
            -- queues); read, and so built, only for traced rows.
            SELECT jsonb_object_agg(u.s::text, u.k) AS map
            FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (e.tags->>'skipq.trace')::bigint, e.queue_id, e.message_id, 'extended', coalesce(p_now, now()),
                   (SELECT (k.map->>e.sequence::text)::bigint FROM keys k), jsonb_build_object('visibleUntil', e.visible_at), NULL
            FROM extended e WHERE e.tags ? 'skipq.trace'
        )
        SELECT extended.* FROM extended;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_done := v_done + v_n;
        EXIT WHEN v_again OR v_done >= cardinality(p_sequences);
        v_again := true;
    END LOOP;
    IF v_gq IS NOT NULL THEN
        -- The groups' leases last as long as their longest message's. The
        -- group rows are locked in key order after the message locks, each
        -- by a probe that only their primary key serves (the group as both
        -- ends of a range within its queue, in group order), which the lock
        -- rechecks on a row's newest version; then updated at the
        -- addresses the locks returned, which stay theirs while this
        -- transaction holds them. Joined by key, a plan made on drained
        -- statistics could walk every group per message.
        SELECT array_agg(g.ctid), array_agg(k.until) INTO v_rows, v_until
        FROM (SELECT m.queue_id, m.group_id, max(m.visible_at) AS until
              FROM skipq.receipt_rows(p_queue_ids, p_sequences, p_tokens) u
              CROSS JOIN LATERAL (SELECT h.queue_id, h.group_id, h.visible_at FROM skipq.messages h
                                  WHERE h.ctid = u.address OFFSET 0) m
              WHERE m.group_id IS NOT NULL
              GROUP BY m.queue_id, m.group_id ORDER BY m.queue_id, m.group_id) k
        CROSS JOIN LATERAL (SELECT g.ctid FROM skipq.message_groups g
                            WHERE g.queue_id = k.queue_id
                              AND g.group_id >= k.group_id AND g.group_id <= k.group_id
                            ORDER BY g.group_id LIMIT 1
                            FOR UPDATE) g;
        UPDATE skipq.message_groups x SET leased_until = greatest(x.leased_until, k.until)
        FROM unnest(v_rows, v_until) AS k(row, until)
        WHERE x.ctid = k.row;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_nack(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_reasons text[], p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
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
#variable_conflict use_column
DECLARE
    v_final record;
    v_fq    bigint[];
    v_fs    bigint[];
    v_ft    bytea[];
    v_fk    bigint[];
    v_gq    bigint[];
    v_gg    text[];
    v_again boolean := false;
    v_done  integer := 0;
    v_n     integer;
BEGIN
    p_now := coalesce(p_now, now());
    -- The groups of FIFO messages, read before they change (the group
    -- checked outside the probe: a condition on group_id in it would let
    -- messages_group_idx, partial on it, be walked instead).
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM skipq.receipt_rows(p_queue_ids, p_sequences, p_tokens) k
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m WHERE m.ctid = k.address OFFSET 0) m
        WHERE m.group_id IS NOT NULL;
    END IF;
    -- Both updates change the rows the handles hold at their addresses, in
    -- two passes, as skipq.message_ack deletes them (DESIGN.md, "Settling
    -- by address"): the TID join is their only plan, and a row that changed
    -- while the first pass waited for it is settled by the second if its
    -- handle still holds it.
    LOOP
        RETURN QUERY
        WITH nacked AS (
            UPDATE skipq.messages m
            SET visible_at = p_now,
                lease_token = NULL,
                ready = true,
                tags = m.tags || jsonb_build_object('skipq.failure',
                                                    skipq.failure_doc('nack', p_reasons[k.n], p_now, m.receive_count)::text)
            FROM skipq.receipt_rows(p_queue_ids, p_sequences, p_tokens) k
            WHERE m.ctid = k.address
              AND m.receive_count < m.max_receive_count
            RETURNING m.queue_id, m.sequence, p_tokens[k.n] AS token, m.message_id, m.tags, p_reasons[k.n] AS reason,
                      p_key_ids[k.n] AS key_id
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT n.queue_id, n.sequence FROM nacked n
            ON CONFLICT DO NOTHING
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
            SELECT (n.tags->>'skipq.trace')::bigint, n.queue_id, n.message_id, 'nacked', p_now, n.key_id,
                   jsonb_build_object('reason', n.reason)
            FROM nacked n WHERE n.tags ? 'skipq.trace'
        )
        SELECT n.queue_id, n.sequence, n.token, NULL::bigint, false FROM nacked n;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_done := v_done + v_n;

        -- The last deliveries: their failure is recorded (and the rows locked)
        -- for message_dead_letter to carry into the dead letters. One left in
        -- place (its dead-letter queue deleted meanwhile) keeps the record.
        WITH f AS (
            UPDATE skipq.messages m
            SET tags = m.tags || jsonb_build_object('skipq.failure',
                                                    skipq.failure_doc('nack', p_reasons[k.n], p_now, m.receive_count)::text)
            FROM skipq.receipt_rows(p_queue_ids, p_sequences, p_tokens) k
            WHERE m.ctid = k.address
              AND m.receive_count >= m.max_receive_count
            RETURNING m.queue_id, m.sequence, p_tokens[k.n] AS token, m.message_id, m.tags, p_reasons[k.n] AS reason,
                      p_key_ids[k.n] AS key_id
        ), traced AS (
            -- Before message_dead_letter records the move: history in order.
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
            SELECT (f.tags->>'skipq.trace')::bigint, f.queue_id, f.message_id, 'nacked', p_now, f.key_id,
                   jsonb_build_object('reason', f.reason)
            FROM f WHERE f.tags ? 'skipq.trace'
        )
        SELECT array_agg(f.queue_id) AS q, array_agg(f.sequence) AS s, array_agg(f.token) AS t,
               array_agg(f.key_id) AS k INTO v_final
        FROM f;
        v_fq := v_fq || v_final.q;
        v_fs := v_fs || v_final.s;
        v_ft := v_ft || v_final.t;
        v_fk := v_fk || v_final.k;
        v_done := v_done + coalesce(cardinality(v_final.q), 0);
        EXIT WHEN v_again OR v_done >= cardinality(p_sequences);
        v_again := true;
    END LOOP;
    IF v_fq IS NOT NULL THEN
        -- The last deliveries move (once: a CTE calling a volatile function is
        -- evaluated once), each matched to its handle by its message. A message
        -- left in place (its dead-letter queue deleted meanwhile) is not
        -- settled: its handle stays valid.
        RETURN QUERY
        WITH moved AS MATERIALIZED (
            SELECT x.source_queue_id, x.source_sequence, x.dead_letter_queue_id
            FROM skipq.message_dead_letter(p_now, v_fq, v_fs, p_server_max_receive_count, v_fk) x
        )
        SELECT k.queue_id, k.sequence, k.token, mv.dead_letter_queue_id, mv.dead_letter_queue_id IS NULL
        FROM unnest(v_fq, v_fs, v_ft) AS k(queue_id, sequence, token)
        JOIN moved mv ON mv.source_queue_id = k.queue_id AND mv.source_sequence = k.sequence;
    END IF;
    -- Last, after every message lock: the groups of the nacked messages.
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_requeue(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_to_queue text, p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(source_queue_id bigint, source_sequence bigint, source_token bytea, destination_queue_id bigint)
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
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_dest   bigint;
    v_fifo   boolean;
    v_keys   record;
    v_gq     bigint[];
    v_gg     text[];
    v_again  boolean;
    v_done   integer;
    v_n      integer;
BEGIN
    p_now := coalesce(p_now, now());
    FOR v_tenant IN
        SELECT DISTINCT sq.tenant FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = u.id) sq
    LOOP
        -- A missing destination is created with its sources' type.
        INSERT INTO skipq.queues (tenant, name, fifo)
        SELECT v_tenant, p_to_queue, bool_or(x.fifo)
        FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.fifo FROM skipq.queues q WHERE q.id = u.id AND q.tenant = v_tenant) x
        WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = v_tenant AND e.name = p_to_queue)
        HAVING count(*) > 0
        ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;
        SELECT d.id, d.fifo INTO v_dest, v_fifo FROM skipq.queues d WHERE d.tenant = v_tenant AND d.name = p_to_queue;
        CONTINUE WHEN v_dest IS NULL; -- deleted meanwhile: these deliveries stay as they are
        SELECT array_agg(k.q) AS q, array_agg(k.s) AS s, array_agg(k.t) AS t, array_agg(k.k) AS k,
               bool_or(x.fifo IS DISTINCT FROM v_fifo) AS mismatch INTO v_keys
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_key_ids) AS k(q, s, t, k)
        CROSS JOIN LATERAL (SELECT x.fifo FROM skipq.queues x WHERE x.id = k.q AND x.tenant = v_tenant) x;
        -- A group's order means nothing in a standard queue, and a standard
        -- queue's message has no group.
        IF v_keys.mismatch THEN
            RAISE EXCEPTION 'skipq: queue_type_mismatch' USING ERRCODE = 'SQ409',
                DETAIL = format('queue %L is %s', p_to_queue, CASE WHEN v_fifo THEN 'FIFO' ELSE 'not FIFO' END);
        END IF;
        v_gq := NULL;
        v_gg := NULL;
        IF v_fifo THEN
            -- The groups the messages leave and join (the same names),
            -- entered before the move.
            SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
            FROM skipq.receipt_rows(v_keys.q, v_keys.s, v_keys.t) k
            CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m WHERE m.ctid = k.address OFFSET 0) m;
            IF v_gq IS NOT NULL THEN
                PERFORM skipq.group_enter(array_fill(v_dest, ARRAY[cardinality(v_gg)]), v_gg);
            END IF;
        END IF;
        -- The messages leave by address, in two passes, as skipq.message_ack
        -- deletes them (DESIGN.md, "Settling by address").
        v_again := false;
        v_done := 0;
        LOOP
            RETURN QUERY
            WITH moved AS (
                DELETE FROM skipq.messages m
                USING skipq.receipt_rows(v_keys.q, v_keys.s, v_keys.t) k
                WHERE m.ctid = k.address
                RETURNING m.*, (v_keys.k)[k.n] AS key_id
            ), unready AS (
                -- A message is ready here only if its lease ran out and the worker
                -- readied it before its holder requeued it: rare, so the plain array form
                -- (which may scan the source queue's ready rows) is good enough.
                DELETE FROM skipq.ready r
                WHERE r.queue_id = ANY(ARRAY(SELECT DISTINCT g.queue_id FROM moved g WHERE g.ready AND NOT v_again))
                  AND r.sequence = ANY(ARRAY(SELECT g.sequence FROM moved g WHERE g.ready AND NOT v_again))
            ), source AS (
                SELECT moved.*, sq.name AS source_name,
                       row_number() OVER (PARTITION BY moved.message_id ORDER BY moved.sequence) AS id_rank
                FROM moved JOIN skipq.queues sq ON sq.id = moved.queue_id
            ), dq AS (
                SELECT d.* FROM skipq.queues d WHERE d.id = v_dest
            ), t AS (
                SELECT p_now AS now
            ), inserted AS (
                INSERT INTO skipq.messages (
                    queue_id, message_id, client_id, metadata, body, body_binary, tags,
                    sent_at, visible_at, expires_at, max_receive_count, dead_letter_queue, re_routed_from, ready,
                    group_id)
                SELECT dq.id,
                       CASE WHEN source.id_rank > 1 OR EXISTS (
                                SELECT 1 FROM skipq.messages x
                                WHERE x.queue_id = dq.id AND x.message_id = source.message_id)
                            THEN skipq.uuid_v7()::text ELSE source.message_id END,
                       source.client_id, source.metadata, source.body, source.body_binary, source.tags,
                       source.sent_at, t.now,
                       CASE WHEN dq.expiration_seconds > 0 THEN t.now + make_interval(secs => dq.expiration_seconds) END,
                       CASE WHEN dq.max_receive_count > 0 THEN dq.max_receive_count
                            ELSE p_server_max_receive_count END,
                       dq.dead_letter_queue,
                       source.source_name,
                       true,
                       source.group_id
                FROM source, dq, t
                RETURNING queue_id, sequence
            ), readied AS (
                INSERT INTO skipq.ready (queue_id, sequence)
                SELECT n.queue_id, n.sequence FROM inserted n
            ), traced AS (
                INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
                SELECT (moved.tags->>'skipq.trace')::bigint, moved.queue_id, moved.message_id, 'requeued', p_now,
                       moved.key_id, jsonb_build_object('toQueue', p_to_queue)
                FROM moved WHERE moved.tags ? 'skipq.trace'
            )
            SELECT moved.queue_id, moved.sequence, moved.lease_token, v_dest
            FROM moved;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_done := v_done + v_n;
            EXIT WHEN v_again OR v_done >= cardinality(v_keys.q);
            v_again := true;
        END LOOP;
        IF v_fifo AND v_gq IS NOT NULL THEN
            PERFORM skipq.group_release(v_gq, v_gg);
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_dead_letter(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(source_queue_id bigint, source_sequence bigint, tenant text, dead_letter_queue_id bigint, dead_letter_queue_name text, inserted_count bigint)
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
#variable_conflict use_column
DECLARE
    v_e record;
BEGIN
    p_now := coalesce(p_now, now());
    -- The callers hold the messages locked (a nack has just recorded their
    -- failure, the worker locked them), so each is read and deleted at its
    -- address (skipq.message_rows; DESIGN.md, "Settling by address"): a
    -- TID scan is the only plan, where joins by key, planned on drained
    -- statistics, could walk the whole table.
    -- Missing dead-letter queues first, in each source's tenant (concurrent
    -- creators are fine: ON CONFLICT skips the loser's row); a FIFO queue's
    -- is FIFO.
    INSERT INTO skipq.queues AS nq (tenant, name, fifo)
    SELECT s.tenant, m.dead_letter_queue, bool_or(s.fifo)
    FROM skipq.message_rows(p_queue_ids, p_sequences) k
    CROSS JOIN LATERAL (SELECT * FROM skipq.messages x WHERE x.ctid = k.address OFFSET 0) m
    CROSS JOIN LATERAL (SELECT q.tenant, q.fifo FROM skipq.queues q WHERE q.id = m.queue_id) s
    WHERE m.dead_letter_queue <> ''
      AND NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = s.tenant AND e.name = m.dead_letter_queue)
    GROUP BY s.tenant, m.dead_letter_queue
    ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;

    -- FIFO: the groups the messages leave, and those they join in FIFO
    -- dead-letter queues (their own group, or one named by their messageId
    -- when they come from a standard queue), entered before the move.
    SELECT array_agg(m.queue_id) FILTER (WHERE m.group_id IS NOT NULL) AS sq,
           array_agg(m.group_id) FILTER (WHERE m.group_id IS NOT NULL) AS sg,
           array_agg(d.id) FILTER (WHERE d.fifo) AS dq,
           array_agg(coalesce(m.group_id, m.message_id)) FILTER (WHERE d.fifo) AS dg
    INTO v_e
    FROM skipq.message_rows(p_queue_ids, p_sequences) k
    CROSS JOIN LATERAL (SELECT * FROM skipq.messages x WHERE x.ctid = k.address OFFSET 0) m
    CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = m.queue_id) s
    LEFT JOIN LATERAL (SELECT e.id, e.fifo FROM skipq.queues e
                       WHERE e.tenant = s.tenant AND e.name = m.dead_letter_queue) d ON true
    WHERE m.group_id IS NOT NULL OR d.fifo;
    IF v_e.dq IS NOT NULL THEN
        PERFORM skipq.group_enter(v_e.dq, v_e.dg);
    END IF;

    RETURN QUERY
    WITH moved AS (
        DELETE FROM skipq.messages m
        USING skipq.message_rows(p_queue_ids, p_sequences) k
        WHERE m.ctid = k.address
          AND m.receive_count >= m.max_receive_count
          -- Never ready (an exhausted message is moved instead of readied), so
          -- it has no ready row to take along.
          AND NOT m.ready
          AND (m.dead_letter_queue = '' OR EXISTS (
              SELECT 1 FROM skipq.queues e, skipq.queues s
              WHERE s.id = m.queue_id AND e.tenant = s.tenant AND e.name = m.dead_letter_queue))
        RETURNING m.*, p_key_ids[k.n] AS key_id
    ), target AS (
        SELECT moved.*, sq.tenant, sq.name AS source_name, dq.id AS dq_id, dq.name AS dq_name,
               dq.delay_seconds AS dq_delay_seconds, dq.expiration_seconds AS dq_expiration_seconds,
               dq.max_receive_count AS dq_max_receive_count, dq.dead_letter_queue AS dq_dead_letter_queue, dq.fifo AS dq_fifo,
               row_number() OVER (PARTITION BY dq.id, moved.message_id ORDER BY moved.sequence) AS id_rank,
               f.doc AS failure
        FROM moved
        -- Why its last delivery failed: the failure recorded for that
        -- delivery (a nack records it just before the move), else its lease
        -- ran out (the worker's moves, and those of nodes of the previous
        -- release).
        CROSS JOIN LATERAL (
            SELECT CASE WHEN (r.doc->>'receiveCount')::integer = moved.receive_count THEN r.doc
                        ELSE skipq.failure_doc('lease_expired', NULL, p_now, moved.receive_count) END AS doc
            FROM (SELECT (moved.tags->>'skipq.failure')::jsonb AS doc) r) f
        JOIN skipq.queues sq ON sq.id = moved.queue_id
        LEFT JOIN skipq.queues dq ON dq.tenant = sq.tenant AND dq.name = moved.dead_letter_queue
    ), t AS (
        SELECT p_now AS now
    ), inserted AS (
        INSERT INTO skipq.messages (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue,
            re_routed_from, dead_lettered_at, ready, group_id)
        SELECT target.dq_id,
               CASE WHEN target.id_rank > 1 OR EXISTS (
                        SELECT 1 FROM skipq.messages x
                        WHERE x.queue_id = target.dq_id AND x.message_id = target.message_id)
                    THEN skipq.uuid_v7()::text ELSE target.message_id END,
               target.client_id, target.metadata, target.body, target.body_binary,
               target.tags || jsonb_build_object(
                   'skipq.failure', target.failure::text,
                   'skipq.deadLetter', jsonb_build_object('cause', target.failure->'cause', 'reason', target.failure->'reason',
                                                          'receiveCount', target.failure->'receiveCount')::text),
               target.sent_at,
               t.now + make_interval(secs => target.dq_delay_seconds),
               CASE WHEN target.dq_delay_seconds > 0 THEN t.now + make_interval(secs => target.dq_delay_seconds) END,
               CASE WHEN target.dq_expiration_seconds > 0
                    THEN t.now + make_interval(secs => target.dq_delay_seconds + target.dq_expiration_seconds) END,
               CASE WHEN target.dq_max_receive_count > 0 THEN target.dq_max_receive_count
                    ELSE p_server_max_receive_count END,
               target.dq_dead_letter_queue,
               target.source_name,
               t.now,
               target.dq_delay_seconds = 0,
               CASE WHEN target.dq_fifo THEN coalesce(target.group_id, target.message_id) END
        FROM target, t
        WHERE target.dq_id IS NOT NULL
        RETURNING queue_id, sequence, visible_at, ready
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT n.queue_id, n.sequence FROM inserted n WHERE n.ready
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT n.visible_at, n.queue_id, n.sequence FROM inserted n WHERE NOT n.ready
    ), traced AS (
        -- Recorded in the queue it leaves; the dead letter keeps its trace
        -- (tags), so its history goes on in the dead-letter queue. Without
        -- one, the message is gone.
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (target.tags->>'skipq.trace')::bigint, target.queue_id, target.message_id, 'dead_lettered', p_now,
               target.key_id,
               jsonb_build_object('toQueue', target.dq_name, 'cause', target.failure->'cause',
                                  'reason', target.failure->'reason'),
               CASE WHEN target.dq_id IS NULL THEN p_now END
        FROM target WHERE target.tags ? 'skipq.trace'
    )
    SELECT target.queue_id AS source_queue_id, target.sequence AS source_sequence, target.tenant,
           target.dq_id AS dead_letter_queue_id,
           target.dq_name AS dead_letter_queue_name,
           (SELECT count(*) FROM inserted)::bigint AS inserted_count
    FROM target;
    IF v_e.sq IS NOT NULL THEN
        PERFORM skipq.group_release(v_e.sq, v_e.sg);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_release(p_queue_ids bigint[], p_group_ids text[]) RETURNS TABLE(queue_id bigint, freed integer)
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
#variable_conflict use_column
DECLARE
    v_q     bigint[];
    v_g     text[];
    v_rows  tid[];
    v_empty tid[];
    v_free  tid[];
BEGIN
    -- Called after messages of the given groups left flight or the queue:
    -- deletes the groups left empty and ends the lease of the others that
    -- have nothing in flight. Returns, per queue, how many groups it made
    -- receivable again.
    SELECT array_agg(k.q ORDER BY k.q, k.g), array_agg(k.g ORDER BY k.q, k.g) INTO v_q, v_g
    FROM (SELECT DISTINCT u.q, u.g FROM unnest(p_queue_ids, p_group_ids) AS u(q, g) WHERE u.g IS NOT NULL) k;
    IF v_q IS NULL THEN
        RETURN;
    END IF;
    -- The rows locked in key order, each found by a probe that only the
    -- primary key can serve (the group as both ends of a range within its
    -- queue, in group order: with sorts off, no other index competes).
    -- The lock rechecks that probe on the newest version of a row another
    -- transaction changed meanwhile and returns its address; a lock of
    -- the address a probe found (as 00041 had it) did not find that
    -- version, and the group was passed over. The addresses cannot change
    -- while this transaction holds the rows, and the statements below name
    -- the rows by address: a TID scan is their only plan. Plans here are
    -- generic and kept for a connection's life: joined to the arrays by
    -- key, one made while the table's statistics said it was nearly empty
    -- walked every group of every queue once per array element, and a
    -- probe by key could as well walk message_groups_turn_idx over all of
    -- the queue's groups.
    SELECT array_agg(x.ctid) INTO v_rows
    FROM unnest(v_q, v_g) AS k(q, g)
    CROSS JOIN LATERAL (SELECT x.ctid FROM skipq.message_groups x
                        WHERE x.queue_id = k.q AND x.group_id >= k.g AND x.group_id <= k.g
                        ORDER BY x.group_id LIMIT 1
                        FOR UPDATE) x;
    IF v_rows IS NULL THEN
        RETURN;
    END IF;

    -- One probe of each group's first ten messages, in a statement after
    -- the locks (so it sees a settle of the same group that committed
    -- while this one waited): is the group empty, is anything of it in
    -- flight. No claim can take the group while its row is held, so the
    -- judgement stands for the statements below. Empty groups are deleted
    -- once their advisory lock is try-locked (a sender holding it will add
    -- a message); the others with nothing in flight get their lease ended.
    SELECT array_agg(x.ctid) FILTER (
               WHERE CASE WHEN NOT f.has_messages
                          THEN pg_try_advisory_xact_lock(skipq.group_lock_key(x.queue_id, x.group_id)) ELSE false END),
           array_agg(x.ctid) FILTER (WHERE NOT f.in_flight)
    INTO v_empty, v_free
    FROM skipq.message_groups x
    CROSS JOIN LATERAL (
        SELECT count(*) > 0 AS has_messages,
               coalesce(bool_or(h.lease_token IS NOT NULL AND h.visible_at > clock_timestamp()), false) AS in_flight
        FROM (SELECT h.lease_token, h.visible_at FROM skipq.messages h
              WHERE (h.queue_id::text || '/' || h.group_id) = (x.queue_id::text || '/' || x.group_id)
                AND h.group_id IS NOT NULL
              ORDER BY h.sequence LIMIT 10) h) f
    WHERE x.ctid = ANY(v_rows);
    IF v_empty IS NOT NULL THEN
        -- A new snapshot, taken after the try-locks: a sender that held
        -- one committed before, and its message is seen here (that group
        -- stays, and its lease is ended below: nothing of it is in flight).
        DELETE FROM skipq.message_groups x
        WHERE x.ctid = ANY(v_empty)
          AND NOT skipq.group_has_messages(x.queue_id, x.group_id);
    END IF;

    -- The rows just deleted are gone for this statement.
    RETURN QUERY
    WITH freed AS (
        UPDATE skipq.message_groups x SET leased_until = '-infinity'
        WHERE x.ctid = ANY(v_free) AND x.leased_until > clock_timestamp()
        RETURNING x.queue_id
    )
    SELECT f.queue_id, count(*)::integer FROM freed f GROUP BY f.queue_id;
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_set_visibility(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_visibility_seconds integer[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS SETOF skipq.messages
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
    v_gq bigint[];
    v_gg text[];
BEGIN
    -- Sets the visibility of receipts (the handles' parts) still leased by
    -- their tokens to now + p_visibility_seconds: extends a lease, or ends
    -- it with 0 (the timer makes the message ready again). A FIFO group's
    -- lease lasts as long as its longest message's. Returns the rows
    -- changed; on a traced queue each gets its 'extended' event under its
    -- handle's API key (p_key_ids).
    -- The groups of FIFO messages, read before they change.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                              AND m.group_id IS NOT NULL) m;
    END IF;
    RETURN QUERY
    WITH extended AS (
        UPDATE skipq.messages m
        SET visible_at = t.now + make_interval(secs => k.seconds),
            ready = false
        FROM (SELECT coalesce(p_now, now()) AS now) t,
             (SELECT unnest(p_queue_ids::bigint[]) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token, unnest(p_visibility_seconds) AS seconds) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
          -- A FIFO lease that ran out stays over: its group may be leased
          -- to another receiver already.
          AND (m.group_id IS NULL OR m.visible_at > t.now)
        RETURNING m.*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM extended e
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = e.queue_id AND y.sequence = e.sequence) x))
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT e.visible_at, e.queue_id, e.sequence FROM extended e
    ), keys AS (
        -- Each handle's API key by its message's sequence (unique across
        -- queues); read, and so built, only for traced rows.
        SELECT jsonb_object_agg(u.s::text, u.k) AS map
        FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (e.tags->>'skipq.trace')::bigint, e.queue_id, e.message_id, 'extended', coalesce(p_now, now()),
               (SELECT (k.map->>e.sequence::text)::bigint FROM keys k), jsonb_build_object('visibleUntil', e.visible_at), NULL
        FROM extended e WHERE e.tags ? 'skipq.trace'
    )
    SELECT extended.* FROM extended;
    IF v_gq IS NOT NULL THEN
        -- The groups' leases last as long as their longest message's, in
        -- key order after the message locks.
        UPDATE skipq.message_groups x SET leased_until = greatest(x.leased_until, k.until)
        FROM (SELECT m.queue_id, m.group_id, max(m.visible_at) AS until
              FROM unnest(p_queue_ids, p_sequences, p_tokens) AS u(queue_id, sequence, token)
              CROSS JOIN LATERAL (SELECT h.queue_id, h.group_id, h.visible_at FROM skipq.messages h
                                  WHERE h.queue_id = u.queue_id AND h.sequence = u.sequence
                                    AND h.lease_token = u.token AND h.group_id IS NOT NULL) m
              GROUP BY m.queue_id, m.group_id ORDER BY m.queue_id, m.group_id) k
        WHERE x.queue_id = k.queue_id AND x.group_id = k.group_id;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_nack(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_reasons text[], p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
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
#variable_conflict use_column
DECLARE
    v_final record;
    v_gq    bigint[];
    v_gg    text[];
BEGIN
    p_now := coalesce(p_now, now());
    -- The groups of FIFO messages, read before they change.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                              AND m.group_id IS NOT NULL) m;
    END IF;
    RETURN QUERY
    WITH nacked AS (
        UPDATE skipq.messages m
        SET visible_at = p_now,
            lease_token = NULL,
            ready = true,
            tags = m.tags || jsonb_build_object('skipq.failure',
                                                skipq.failure_doc('nack', k.reason, p_now, m.receive_count)::text)
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_reasons, p_key_ids)
             AS k(queue_id, sequence, token, reason, key_id)
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count < m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.queue_id, m.sequence, k.token::bytea AS token, m.message_id, m.tags, k.reason, k.key_id
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT n.queue_id, n.sequence FROM nacked n
        ON CONFLICT DO NOTHING
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
        SELECT (n.tags->>'skipq.trace')::bigint, n.queue_id, n.message_id, 'nacked', p_now, n.key_id,
               jsonb_build_object('reason', n.reason)
        FROM nacked n WHERE n.tags ? 'skipq.trace'
    )
    SELECT n.queue_id, n.sequence, n.token, NULL::bigint, false FROM nacked n;

    -- The last deliveries: their failure is recorded (and the rows locked)
    -- for message_dead_letter to carry into the dead letters. One left in
    -- place (its dead-letter queue deleted meanwhile) keeps the record.
    WITH f AS (
        UPDATE skipq.messages m
        SET tags = m.tags || jsonb_build_object('skipq.failure',
                                                skipq.failure_doc('nack', k.reason, p_now, m.receive_count)::text)
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_reasons, p_key_ids)
             AS k(queue_id, sequence, token, reason, key_id)
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count >= m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.queue_id, m.sequence, k.token::bytea AS token, m.message_id, m.tags, k.reason, k.key_id
    ), traced AS (
        -- Before message_dead_letter records the move: history in order.
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
        SELECT (f.tags->>'skipq.trace')::bigint, f.queue_id, f.message_id, 'nacked', p_now, f.key_id,
               jsonb_build_object('reason', f.reason)
        FROM f WHERE f.tags ? 'skipq.trace'
    )
    SELECT array_agg(f.queue_id) AS q, array_agg(f.sequence) AS s, array_agg(f.token) AS t,
           array_agg(f.key_id) AS k INTO v_final
    FROM f;
    IF v_final.q IS NOT NULL THEN
        -- The last deliveries move (once: a CTE calling a volatile function is
        -- evaluated once), each matched to its handle by its message. A message
        -- left in place (its dead-letter queue deleted meanwhile) is not
        -- settled: its handle stays valid.
        RETURN QUERY
        WITH moved AS MATERIALIZED (
            SELECT x.source_queue_id, x.source_sequence, x.dead_letter_queue_id
            FROM skipq.message_dead_letter(p_now, v_final.q, v_final.s, p_server_max_receive_count, v_final.k) x
        )
        SELECT k.queue_id, k.sequence, k.token, mv.dead_letter_queue_id, mv.dead_letter_queue_id IS NULL
        FROM unnest(v_final.q, v_final.s, v_final.t) AS k(queue_id, sequence, token)
        JOIN moved mv ON mv.source_queue_id = k.queue_id AND mv.source_sequence = k.sequence;
    END IF;
    -- Last, after every message lock: the groups of the nacked messages.
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_requeue(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_to_queue text, p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(source_queue_id bigint, source_sequence bigint, source_token bytea, destination_queue_id bigint)
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
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_dest   bigint;
    v_fifo   boolean;
    v_keys   record;
    v_gq     bigint[];
    v_gg     text[];
BEGIN
    p_now := coalesce(p_now, now());
    FOR v_tenant IN
        SELECT DISTINCT sq.tenant FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = u.id) sq
    LOOP
        -- A missing destination is created with its sources' type.
        INSERT INTO skipq.queues (tenant, name, fifo)
        SELECT v_tenant, p_to_queue, bool_or(x.fifo)
        FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.fifo FROM skipq.queues q WHERE q.id = u.id AND q.tenant = v_tenant) x
        WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = v_tenant AND e.name = p_to_queue)
        HAVING count(*) > 0
        ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;
        SELECT d.id, d.fifo INTO v_dest, v_fifo FROM skipq.queues d WHERE d.tenant = v_tenant AND d.name = p_to_queue;
        CONTINUE WHEN v_dest IS NULL; -- deleted meanwhile: these deliveries stay as they are
        SELECT array_agg(k.q) AS q, array_agg(k.s) AS s, array_agg(k.t) AS t, array_agg(k.k) AS k,
               bool_or(x.fifo IS DISTINCT FROM v_fifo) AS mismatch INTO v_keys
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_key_ids) AS k(q, s, t, k)
        CROSS JOIN LATERAL (SELECT x.fifo FROM skipq.queues x WHERE x.id = k.q AND x.tenant = v_tenant) x;
        -- A group's order means nothing in a standard queue, and a standard
        -- queue's message has no group.
        IF v_keys.mismatch THEN
            RAISE EXCEPTION 'skipq: queue_type_mismatch' USING ERRCODE = 'SQ409',
                DETAIL = format('queue %L is %s', p_to_queue, CASE WHEN v_fifo THEN 'FIFO' ELSE 'not FIFO' END);
        END IF;
        v_gq := NULL;
        v_gg := NULL;
        IF v_fifo THEN
            -- The groups the messages leave and join (the same names),
            -- entered before the move.
            SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
            FROM unnest(v_keys.q, v_keys.s, v_keys.t) AS k(q, s, t)
            CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                                WHERE m.queue_id = k.q AND m.sequence = k.s AND m.lease_token = k.t) m;
            IF v_gq IS NOT NULL THEN
                PERFORM skipq.group_enter(array_fill(v_dest, ARRAY[cardinality(v_gg)]), v_gg);
            END IF;
        END IF;
        RETURN QUERY
        WITH moved AS (
            DELETE FROM skipq.messages m
            USING (SELECT unnest(v_keys.q) AS queue_id, unnest(v_keys.s) AS sequence,
                    unnest(v_keys.t) AS token, unnest(v_keys.k) AS key_id) k
            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
              AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
            RETURNING m.*, k.key_id
        ), unready AS (
            -- A message is ready here only if its lease ran out and the worker
            -- readied it before its holder requeued it: rare, so the plain array form
            -- (which may scan the source queue's ready rows) is good enough.
            DELETE FROM skipq.ready r
            WHERE r.queue_id = ANY(ARRAY(SELECT DISTINCT g.queue_id FROM moved g WHERE g.ready))
              AND r.sequence = ANY(ARRAY(SELECT g.sequence FROM moved g WHERE g.ready))
        ), source AS (
            SELECT moved.*, sq.name AS source_name,
                   row_number() OVER (PARTITION BY moved.message_id ORDER BY moved.sequence) AS id_rank
            FROM moved JOIN skipq.queues sq ON sq.id = moved.queue_id
        ), dq AS (
            SELECT d.* FROM skipq.queues d WHERE d.id = v_dest
        ), t AS (
            SELECT p_now AS now
        ), inserted AS (
            INSERT INTO skipq.messages (
                queue_id, message_id, client_id, metadata, body, body_binary, tags,
                sent_at, visible_at, expires_at, max_receive_count, dead_letter_queue, re_routed_from, ready,
                group_id)
            SELECT dq.id,
                   CASE WHEN source.id_rank > 1 OR EXISTS (
                            SELECT 1 FROM skipq.messages x
                            WHERE x.queue_id = dq.id AND x.message_id = source.message_id)
                        THEN skipq.uuid_v7()::text ELSE source.message_id END,
                   source.client_id, source.metadata, source.body, source.body_binary, source.tags,
                   source.sent_at, t.now,
                   CASE WHEN dq.expiration_seconds > 0 THEN t.now + make_interval(secs => dq.expiration_seconds) END,
                   CASE WHEN dq.max_receive_count > 0 THEN dq.max_receive_count
                        ELSE p_server_max_receive_count END,
                   dq.dead_letter_queue,
                   source.source_name,
                   true,
                   source.group_id
            FROM source, dq, t
            RETURNING queue_id, sequence
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT n.queue_id, n.sequence FROM inserted n
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
            SELECT (moved.tags->>'skipq.trace')::bigint, moved.queue_id, moved.message_id, 'requeued', p_now,
                   moved.key_id, jsonb_build_object('toQueue', p_to_queue)
            FROM moved WHERE moved.tags ? 'skipq.trace'
        )
        SELECT moved.queue_id, moved.sequence, moved.lease_token, v_dest
        FROM moved;
        IF v_fifo AND v_gq IS NOT NULL THEN
            PERFORM skipq.group_release(v_gq, v_gg);
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_dead_letter(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(source_queue_id bigint, source_sequence bigint, tenant text, dead_letter_queue_id bigint, dead_letter_queue_name text, inserted_count bigint)
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
#variable_conflict use_column
DECLARE
    v_e record;
BEGIN
    p_now := coalesce(p_now, now());
    -- Missing dead-letter queues first, in each source's tenant (concurrent
    -- creators are fine: ON CONFLICT skips the loser's row); a FIFO queue's
    -- is FIFO.
    INSERT INTO skipq.queues AS nq (tenant, name, fifo)
    SELECT s.tenant, m.dead_letter_queue, bool_or(s.fifo)
    FROM unnest(p_queue_ids, p_sequences) AS k(queue_id, sequence)
    CROSS JOIN LATERAL (SELECT * FROM skipq.messages x
                        WHERE x.queue_id = k.queue_id AND x.sequence = k.sequence) m
    CROSS JOIN LATERAL (SELECT q.tenant, q.fifo FROM skipq.queues q WHERE q.id = m.queue_id) s
    WHERE m.dead_letter_queue <> ''
      AND NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = s.tenant AND e.name = m.dead_letter_queue)
    GROUP BY s.tenant, m.dead_letter_queue
    ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;

    -- FIFO: the groups the messages leave, and those they join in FIFO
    -- dead-letter queues (their own group, or one named by their messageId
    -- when they come from a standard queue), entered before the move.
    SELECT array_agg(m.queue_id) FILTER (WHERE m.group_id IS NOT NULL) AS sq,
           array_agg(m.group_id) FILTER (WHERE m.group_id IS NOT NULL) AS sg,
           array_agg(d.id) FILTER (WHERE d.fifo) AS dq,
           array_agg(coalesce(m.group_id, m.message_id)) FILTER (WHERE d.fifo) AS dg
    INTO v_e
    FROM unnest(p_queue_ids, p_sequences) AS k(queue_id, sequence)
    CROSS JOIN LATERAL (SELECT * FROM skipq.messages x
                        WHERE x.queue_id = k.queue_id AND x.sequence = k.sequence) m
    CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = m.queue_id) s
    LEFT JOIN LATERAL (SELECT e.id, e.fifo FROM skipq.queues e
                       WHERE e.tenant = s.tenant AND e.name = m.dead_letter_queue) d ON true
    WHERE m.group_id IS NOT NULL OR d.fifo;
    IF v_e.dq IS NOT NULL THEN
        PERFORM skipq.group_enter(v_e.dq, v_e.dg);
    END IF;

    RETURN QUERY
    WITH moved AS (
        DELETE FROM skipq.messages m
        USING (SELECT unnest(p_queue_ids) AS queue_id, unnest(p_sequences) AS sequence,
                      unnest(p_key_ids) AS key_id) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence
          AND m.receive_count >= m.max_receive_count
          -- Never ready (an exhausted message is moved instead of readied), so
          -- it has no ready row to take along.
          AND NOT m.ready
          AND (m.dead_letter_queue = '' OR EXISTS (
              SELECT 1 FROM skipq.queues e, skipq.queues s
              WHERE s.id = m.queue_id AND e.tenant = s.tenant AND e.name = m.dead_letter_queue))
        RETURNING m.*, k.key_id
    ), target AS (
        SELECT moved.*, sq.tenant, sq.name AS source_name, dq.id AS dq_id, dq.name AS dq_name,
               dq.delay_seconds AS dq_delay_seconds, dq.expiration_seconds AS dq_expiration_seconds,
               dq.max_receive_count AS dq_max_receive_count, dq.dead_letter_queue AS dq_dead_letter_queue, dq.fifo AS dq_fifo,
               row_number() OVER (PARTITION BY dq.id, moved.message_id ORDER BY moved.sequence) AS id_rank,
               f.doc AS failure
        FROM moved
        -- Why its last delivery failed: the failure recorded for that
        -- delivery (a nack records it just before the move), else its lease
        -- ran out (the worker's moves, and those of nodes of the previous
        -- release).
        CROSS JOIN LATERAL (
            SELECT CASE WHEN (r.doc->>'receiveCount')::integer = moved.receive_count THEN r.doc
                        ELSE skipq.failure_doc('lease_expired', NULL, p_now, moved.receive_count) END AS doc
            FROM (SELECT (moved.tags->>'skipq.failure')::jsonb AS doc) r) f
        JOIN skipq.queues sq ON sq.id = moved.queue_id
        LEFT JOIN skipq.queues dq ON dq.tenant = sq.tenant AND dq.name = moved.dead_letter_queue
    ), t AS (
        SELECT p_now AS now
    ), inserted AS (
        INSERT INTO skipq.messages (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue,
            re_routed_from, dead_lettered_at, ready, group_id)
        SELECT target.dq_id,
               CASE WHEN target.id_rank > 1 OR EXISTS (
                        SELECT 1 FROM skipq.messages x
                        WHERE x.queue_id = target.dq_id AND x.message_id = target.message_id)
                    THEN skipq.uuid_v7()::text ELSE target.message_id END,
               target.client_id, target.metadata, target.body, target.body_binary,
               target.tags || jsonb_build_object(
                   'skipq.failure', target.failure::text,
                   'skipq.deadLetter', jsonb_build_object('cause', target.failure->'cause', 'reason', target.failure->'reason',
                                                          'receiveCount', target.failure->'receiveCount')::text),
               target.sent_at,
               t.now + make_interval(secs => target.dq_delay_seconds),
               CASE WHEN target.dq_delay_seconds > 0 THEN t.now + make_interval(secs => target.dq_delay_seconds) END,
               CASE WHEN target.dq_expiration_seconds > 0
                    THEN t.now + make_interval(secs => target.dq_delay_seconds + target.dq_expiration_seconds) END,
               CASE WHEN target.dq_max_receive_count > 0 THEN target.dq_max_receive_count
                    ELSE p_server_max_receive_count END,
               target.dq_dead_letter_queue,
               target.source_name,
               t.now,
               target.dq_delay_seconds = 0,
               CASE WHEN target.dq_fifo THEN coalesce(target.group_id, target.message_id) END
        FROM target, t
        WHERE target.dq_id IS NOT NULL
        RETURNING queue_id, sequence, visible_at, ready
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT n.queue_id, n.sequence FROM inserted n WHERE n.ready
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT n.visible_at, n.queue_id, n.sequence FROM inserted n WHERE NOT n.ready
    ), traced AS (
        -- Recorded in the queue it leaves; the dead letter keeps its trace
        -- (tags), so its history goes on in the dead-letter queue. Without
        -- one, the message is gone.
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (target.tags->>'skipq.trace')::bigint, target.queue_id, target.message_id, 'dead_lettered', p_now,
               target.key_id,
               jsonb_build_object('toQueue', target.dq_name, 'cause', target.failure->'cause',
                                  'reason', target.failure->'reason'),
               CASE WHEN target.dq_id IS NULL THEN p_now END
        FROM target WHERE target.tags ? 'skipq.trace'
    )
    SELECT target.queue_id AS source_queue_id, target.sequence AS source_sequence, target.tenant,
           target.dq_id AS dead_letter_queue_id,
           target.dq_name AS dead_letter_queue_name,
           (SELECT count(*) FROM inserted)::bigint AS inserted_count
    FROM target;
    IF v_e.sq IS NOT NULL THEN
        PERFORM skipq.group_release(v_e.sq, v_e.sg);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_release(p_queue_ids bigint[], p_group_ids text[]) RETURNS TABLE(queue_id bigint, freed integer)
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
#variable_conflict use_column
DECLARE
    v_q     bigint[];
    v_g     text[];
    v_rows  tid[];
    v_empty tid[];
    v_free  tid[];
BEGIN
    -- Called after messages of the given groups left flight or the queue:
    -- deletes the groups left empty and ends the lease of the others that
    -- have nothing in flight. Returns, per queue, how many groups it made
    -- receivable again.
    SELECT array_agg(k.q ORDER BY k.q, k.g), array_agg(k.g ORDER BY k.q, k.g) INTO v_q, v_g
    FROM (SELECT DISTINCT u.q, u.g FROM unnest(p_queue_ids, p_group_ids) AS u(q, g) WHERE u.g IS NOT NULL) k;
    IF v_q IS NULL THEN
        RETURN;
    END IF;
    -- The rows locked in key order, each found by a range probe that only
    -- the primary key can serve in order (with sorts off, no other index
    -- competes) and locked by its address (an update since is followed to
    -- the newest version, whose key is checked). Their addresses cannot
    -- change while this transaction holds them, and the statements below
    -- name the rows by address: a TID scan is their only plan. Plans here
    -- are generic and kept for a connection's life: joined to the arrays
    -- by key, one made while the table's statistics said it was nearly
    -- empty walked every group of every queue once per array element, and
    -- a probe by key could as well walk message_groups_turn_idx over all
    -- of the queue's groups.
    SELECT array_agg(x.ctid) INTO v_rows
    FROM unnest(v_q, v_g) AS k(q, g)
    CROSS JOIN LATERAL (SELECT x.ctid FROM skipq.message_groups x
                        WHERE x.ctid = (SELECT y.ctid FROM skipq.message_groups y
                                        WHERE (y.queue_id, y.group_id) >= (k.q, k.g)
                                        ORDER BY y.queue_id, y.group_id LIMIT 1)
                          AND x.queue_id = k.q AND x.group_id = k.g
                        FOR UPDATE) x;
    IF v_rows IS NULL THEN
        RETURN;
    END IF;

    -- One probe of each group's first ten messages, in a statement after
    -- the locks (so it sees a settle of the same group that committed
    -- while this one waited): is the group empty, is anything of it in
    -- flight. No claim can take the group while its row is held, so the
    -- judgement stands for the statements below. Empty groups are deleted
    -- once their advisory lock is try-locked (a sender holding it will add
    -- a message); the others with nothing in flight get their lease ended.
    SELECT array_agg(x.ctid) FILTER (
               WHERE CASE WHEN NOT f.has_messages
                          THEN pg_try_advisory_xact_lock(skipq.group_lock_key(x.queue_id, x.group_id)) ELSE false END),
           array_agg(x.ctid) FILTER (WHERE NOT f.in_flight)
    INTO v_empty, v_free
    FROM skipq.message_groups x
    CROSS JOIN LATERAL (
        SELECT count(*) > 0 AS has_messages,
               coalesce(bool_or(h.lease_token IS NOT NULL AND h.visible_at > clock_timestamp()), false) AS in_flight
        FROM (SELECT h.lease_token, h.visible_at FROM skipq.messages h
              WHERE (h.queue_id::text || '/' || h.group_id) = (x.queue_id::text || '/' || x.group_id)
                AND h.group_id IS NOT NULL
              ORDER BY h.sequence LIMIT 10) h) f
    WHERE x.ctid = ANY(v_rows);
    IF v_empty IS NOT NULL THEN
        -- A new snapshot, taken after the try-locks: a sender that held
        -- one committed before, and its message is seen here (that group
        -- stays, and its lease is ended below: nothing of it is in flight).
        DELETE FROM skipq.message_groups x
        WHERE x.ctid = ANY(v_empty)
          AND NOT skipq.group_has_messages(x.queue_id, x.group_id);
    END IF;

    -- The rows just deleted are gone for this statement.
    RETURN QUERY
    WITH freed AS (
        UPDATE skipq.message_groups x SET leased_until = '-infinity'
        WHERE x.ctid = ANY(v_free) AND x.leased_until > clock_timestamp()
        RETURNING x.queue_id
    )
    SELECT f.queue_id, count(*)::integer FROM freed f GROUP BY f.queue_id;
END $$;
-- +goose StatementEnd

DROP FUNCTION skipq.receipt_rows(bigint[], bigint[], bytea[]);
DROP FUNCTION skipq.message_rows(bigint[], bigint[]);
