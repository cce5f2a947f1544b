-- +goose Up
-- The standard claim's plans no longer depend on the statistics they were
-- made with (issue 29). skipq.message_claim (claim and peek) and
-- skipq.message_claim_and_delete (autoAck) run generic plans kept for a
-- connection's life; made on statistics of a drained table (one live row
-- over a thousand pages, after a vacuum), the walk probed each message
-- through messages_queue_sent_idx, whose third column is the sequence, so
-- each probe walked all of the queue's entries, and the claim's delete of
-- its ready rows and update of its messages kept `sequence = ANY(...)` as
-- a filter over all of the queue's ready rows and messages. A claim of 100
-- behind 1,000 messages read 1,644 buffers where it reads about 900
-- (TestStandardClaimPlansIgnoreDrainedStatistics). Each message is now found by a range
-- probe on the primary key in its order, which no other index serves
-- without a sort (sorts are off), and locked at that address with its key
-- checked; the rows the walk locked are deleted and updated by address, a
-- TID scan whatever the statistics (the FIFO claim's way since 00041).
-- A message that another transaction updated after the claim's snapshot is
-- now skipped by this claim, as a locked one is, where the lock by key
-- followed it to the newer version.
--
-- Signatures and results are unchanged; the Down restores the previous
-- bodies.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint, p_key_id bigint DEFAULT NULL::bigint, p_max_per_group integer DEFAULT NULL::integer, p_mode text DEFAULT NULL::text) RETURNS SETOF skipq.messages
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
    q     skipq.queues;
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    -- A receive: up to p_max_messages messages of the queue, within the
    -- response budget (p_max_response_bytes, each message measured by
    -- skipq.message_wire_size plus p_message_overhead; the first always
    -- fits), returned in answer order. The queue's kind decides the claim:
    -- a FIFO queue's is skipq.message_claim_grouped (p_max_per_group of
    -- each group, groups in rotation), a standard queue's the oldest ready
    -- messages by sequence. p_mode: 'claim' leases them for
    -- p_visibility_seconds (NULL: the queue's default), 'delete' (autoAck)
    -- removes or retains them (skipq.message_claim_and_delete), 'peek'
    -- reads them unchanged and unlocked; NULL, the previous release's call,
    -- claims a standard queue and returns nothing from a FIFO one. On a
    -- traced queue each claimed message gets its 'received' event, under
    -- p_key_id (the request's API key, NULL for none).
    --
    -- The walk visits ready rows in sequence order and locks each ready
    -- row, then its message, with SKIP LOCKED, so concurrent claims pass
    -- each other without waiting, and measures sizes without fetching
    -- bodies (octet_length reads the TOAST header only). The ready row is
    -- locked first because a claim that committed after this statement's
    -- snapshot deleted it: the lock finds it gone and skips it, where a
    -- lock on its message would succeed on the newer version, fail the
    -- recheck and stay held to this claim's commit, making that message's
    -- ack wait.
    --
    -- Every row is found in a way only one plan serves, whatever the
    -- statistics the generic plan was made with. On statistics of a
    -- drained table (one live row over many pages) every index that leads
    -- with the queue id costs the same, and a probe by key walked
    -- messages_queue_sent_idx over all of the queue's messages, the deletes
    -- of ready rows and the update of the claimed messages by key did the
    -- same over ready_pkey and messages_queue_sent_idx (sequence = ANY(...)
    -- a filter, not an index condition): each claim read the whole queue.
    -- So a message is found by a range probe on the primary key in its
    -- order, which no other index serves without a sort (sorts are off),
    -- and locked at that address with its key checked; the ready rows and
    -- messages the walk locked are then deleted and updated by address (a
    -- TID scan is their only plan). A row locked at its address cannot
    -- move; one that another transaction updated since this statement's
    -- snapshot fails the lock's recheck and is skipped, as a locked one is.
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue;
    IF NOT FOUND OR (q.fifo AND p_mode IS NULL) THEN
        RETURN;
    END IF;
    IF q.fifo THEN
        RETURN QUERY SELECT * FROM skipq.message_claim_grouped(p_tenant, p_queue, p_now, p_visibility_seconds,
            p_max_messages, coalesce(p_max_per_group, 1), p_max_response_bytes, p_message_overhead, p_mode, p_key_id);
        RETURN;
    END IF;
    IF p_mode = 'delete' THEN
        RETURN QUERY SELECT d.* FROM skipq.message_claim_and_delete(p_tenant, p_queue, p_now, p_max_messages,
            p_max_response_bytes, p_message_overhead, p_key_id) d ORDER BY d.sequence;
        RETURN;
    END IF;
    IF p_mode = 'peek' THEN
        RETURN QUERY
        WITH walked AS (
            SELECT c.row, c.sequence, c.size
            FROM (SELECT r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence) r
            CROSS JOIN LATERAL (
                SELECT c.ctid AS row, c.sequence,
                       skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                           c.client_id, c.re_routed_from) + p_message_overhead AS size
                FROM skipq.messages c
                WHERE c.ctid = (SELECT y.ctid FROM skipq.messages y
                                WHERE (y.queue_id, y.sequence) >= (q.id, r.sequence)
                                ORDER BY y.queue_id, y.sequence LIMIT 1)
                  AND c.queue_id = q.id AND c.sequence = r.sequence
                  AND c.ready AND (c.expires_at IS NULL OR c.expires_at > v_now)) c
            LIMIT p_max_messages
        ), picked AS (
            SELECT w.row FROM (
                SELECT w.row, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
                FROM walked w
                WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
            WHERE w.n = 1 OR w.before < p_max_response_bytes
        )
        SELECT m.* FROM skipq.messages m
        WHERE m.ctid = ANY(ARRAY(SELECT p.row FROM picked p))
        ORDER BY m.sequence;
        RETURN;
    END IF;
    RETURN QUERY
    WITH t AS (
        SELECT v_now AS now, coalesce(p_visibility_seconds, q.visibility_seconds) AS visibility_seconds
    ), walked AS (
        SELECT r.row AS ready_row, c.row, c.sequence, c.size
        FROM (SELECT r.ctid AS row, r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence
              FOR UPDATE SKIP LOCKED) r
        CROSS JOIN LATERAL (
            SELECT c.ctid AS row, c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.ctid = (SELECT y.ctid FROM skipq.messages y
                            WHERE (y.queue_id, y.sequence) >= (q.id, r.sequence)
                            ORDER BY y.queue_id, y.sequence LIMIT 1)
              AND c.queue_id = q.id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > v_now)
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    ), picked AS (
        SELECT w.ready_row, w.row, w.sequence FROM (
            SELECT w.ready_row, w.row, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM walked w
            WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n = 1 OR w.before < p_max_response_bytes
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(SELECT p.ready_row FROM picked p))
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT t.now + make_interval(secs => t.visibility_seconds), q.id, p.sequence
        FROM picked p, t
    ), claimed AS (
        UPDATE skipq.messages m
        SET visible_at        = t.now + make_interval(secs => t.visibility_seconds),
            receive_count     = m.receive_count + 1,
            first_received_at = coalesce(m.first_received_at, t.now),
            lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
            ready             = false
        FROM t
        WHERE m.ctid = ANY(ARRAY(SELECT p.row FROM picked p))
        RETURNING m.*
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (c.tags->>'skipq.trace')::bigint, c.queue_id, c.message_id, 'received', v_now, p_key_id,
               jsonb_build_object('receiveCount', c.receive_count, 'visibleUntil', c.visible_at), NULL
        FROM claimed c WHERE c.tags ? 'skipq.trace'
    )
    SELECT c.* FROM claimed c ORDER BY c.sequence;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_and_delete(p_tenant text, p_queue text, p_now timestamp with time zone, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint, p_key_id bigint DEFAULT NULL::bigint) RETURNS SETOF skipq.messages
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
    v_now    timestamptz := coalesce(p_now, clock_timestamp());
    v_retain integer;
    v_seqs   bigint[];
    v_ready_rows tid[];
    v_rows   tid[];
BEGIN
    -- autoAck on a standard queue: claims as skipq.message_claim does and
    -- removes what it takes, or retains it on a queue with
    -- retainAckedSeconds (skipq.message_retain). receive_count is reported
    -- as it was before this delivery. On a traced queue each message gets
    -- its 'received' and 'acked' events (gone at once unless retained).
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND NOT x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT r.seconds INTO v_retain FROM skipq.queue_retention r WHERE r.queue_id = q.id;
    -- The walk is skipq.message_claim's (which says why each row is found
    -- by a range probe on the primary key and then named by address); the
    -- rows it locks keep their addresses to this transaction's end, so the
    -- statements after it delete them by address too.
    WITH walked AS (
        SELECT r.row AS ready_row, c.row, c.sequence, c.size
        FROM (SELECT r.ctid AS row, r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence
              FOR UPDATE SKIP LOCKED) r
        CROSS JOIN LATERAL (
            SELECT c.ctid AS row, c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.ctid = (SELECT y.ctid FROM skipq.messages y
                            WHERE (y.queue_id, y.sequence) >= (q.id, r.sequence)
                            ORDER BY y.queue_id, y.sequence LIMIT 1)
              AND c.queue_id = q.id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > v_now)
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    )
    SELECT array_agg(w.sequence), array_agg(w.ready_row), array_agg(w.row)
    INTO v_seqs, v_ready_rows, v_rows FROM (
        SELECT w.ready_row, w.row, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
        FROM walked w
        WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
    WHERE w.n = 1 OR w.before < p_max_response_bytes;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;
    IF v_retain IS NOT NULL THEN
        RETURN QUERY
        WITH r AS (
            SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
                array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true)
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL
            FROM r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace'
            ORDER BY r.sequence, e.n
        )
        SELECT * FROM r;
        RETURN;
    END IF;
    RETURN QUERY
    WITH unready AS (
        DELETE FROM skipq.ready r WHERE r.ctid = ANY(v_ready_rows)
    ), gone AS (
        DELETE FROM skipq.messages m
        WHERE m.ctid = ANY(v_rows)
        RETURNING m.*
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, e.type, v_now, p_key_id,
               CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', g.receive_count, 'visibleUntil', g.visible_at) END,
               CASE WHEN e.n = 2 THEN v_now END
        FROM gone g CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
        WHERE g.tags ? 'skipq.trace'
        ORDER BY g.sequence, e.n
    )
    SELECT * FROM gone;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint, p_key_id bigint DEFAULT NULL::bigint, p_max_per_group integer DEFAULT NULL::integer, p_mode text DEFAULT NULL::text) RETURNS SETOF skipq.messages
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
    q     skipq.queues;
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    -- A receive: up to p_max_messages messages of the queue, within the
    -- response budget (p_max_response_bytes, each message measured by
    -- skipq.message_wire_size plus p_message_overhead; the first always
    -- fits), returned in answer order. The queue's kind decides the claim:
    -- a FIFO queue's is skipq.message_claim_grouped (p_max_per_group of
    -- each group, groups in rotation), a standard queue's the oldest ready
    -- messages by sequence. p_mode: 'claim' leases them for
    -- p_visibility_seconds (NULL: the queue's default), 'delete' (autoAck)
    -- removes or retains them (skipq.message_claim_and_delete), 'peek'
    -- reads them unchanged and unlocked; NULL, the previous release's call,
    -- claims a standard queue and returns nothing from a FIFO one. On a
    -- traced queue each claimed message gets its 'received' event, under
    -- p_key_id (the request's API key, NULL for none).
    --
    -- The walk visits ready rows in sequence order and locks each ready
    -- row, then its message, with SKIP LOCKED, so concurrent claims pass
    -- each other without waiting, and measures sizes without fetching
    -- bodies (octet_length reads the TOAST header only). The ready row is
    -- locked first because a claim that committed after this statement's
    -- snapshot deleted it: the lock finds it gone and skips it, where a
    -- lock on its message would succeed on the newer version, fail the
    -- recheck and stay held to this claim's commit, making that message's
    -- ack wait. Ready rows are deleted by primary-key
    -- probes (`sequence = ANY(...)` on one queue), never by a join: joined
    -- to a CTE, the planner may walk the whole ready table once per row of
    -- the CTE (measured: 30 ms for a claim of 100 behind 1,100 ready rows).
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue;
    IF NOT FOUND OR (q.fifo AND p_mode IS NULL) THEN
        RETURN;
    END IF;
    IF q.fifo THEN
        RETURN QUERY SELECT * FROM skipq.message_claim_grouped(p_tenant, p_queue, p_now, p_visibility_seconds,
            p_max_messages, coalesce(p_max_per_group, 1), p_max_response_bytes, p_message_overhead, p_mode, p_key_id);
        RETURN;
    END IF;
    IF p_mode = 'delete' THEN
        RETURN QUERY SELECT d.* FROM skipq.message_claim_and_delete(p_tenant, p_queue, p_now, p_max_messages,
            p_max_response_bytes, p_message_overhead, p_key_id) d ORDER BY d.sequence;
        RETURN;
    END IF;
    IF p_mode = 'peek' THEN
        RETURN QUERY
        WITH walked AS (
            SELECT c.sequence, c.size
            FROM (SELECT r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence) r
            CROSS JOIN LATERAL (
                SELECT c.sequence,
                       skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                           c.client_id, c.re_routed_from) + p_message_overhead AS size
                FROM skipq.messages c
                WHERE c.queue_id = q.id AND c.sequence = r.sequence
                  AND c.ready AND (c.expires_at IS NULL OR c.expires_at > v_now)) c
            LIMIT p_max_messages
        ), picked AS (
            SELECT w.sequence FROM (
                SELECT w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
                FROM walked w
                WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
            WHERE w.n = 1 OR w.before < p_max_response_bytes
        )
        SELECT m.* FROM skipq.messages m
        WHERE m.queue_id = q.id AND m.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
        ORDER BY m.sequence;
        RETURN;
    END IF;
    RETURN QUERY
    WITH t AS (
        SELECT v_now AS now, coalesce(p_visibility_seconds, q.visibility_seconds) AS visibility_seconds
    ), walked AS (
        SELECT c.sequence, c.size
        FROM (SELECT r.queue_id, r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence
              FOR UPDATE SKIP LOCKED) r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = r.queue_id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > v_now)
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    ), picked AS (
        SELECT w.sequence FROM (
            SELECT w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM walked w
            WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n = 1 OR w.before < p_max_response_bytes
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.queue_id = q.id AND r.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT t.now + make_interval(secs => t.visibility_seconds), q.id, p.sequence
        FROM picked p, t
    ), claimed AS (
        UPDATE skipq.messages m
        SET visible_at        = t.now + make_interval(secs => t.visibility_seconds),
            receive_count     = m.receive_count + 1,
            first_received_at = coalesce(m.first_received_at, t.now),
            lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
            ready             = false
        FROM t
        WHERE m.queue_id = q.id AND m.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
        RETURNING m.*
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (c.tags->>'skipq.trace')::bigint, c.queue_id, c.message_id, 'received', v_now, p_key_id,
               jsonb_build_object('receiveCount', c.receive_count, 'visibleUntil', c.visible_at), NULL
        FROM claimed c WHERE c.tags ? 'skipq.trace'
    )
    SELECT c.* FROM claimed c ORDER BY c.sequence;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_and_delete(p_tenant text, p_queue text, p_now timestamp with time zone, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint, p_key_id bigint DEFAULT NULL::bigint) RETURNS SETOF skipq.messages
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
    v_now    timestamptz := coalesce(p_now, clock_timestamp());
    v_retain integer;
    v_seqs   bigint[];
BEGIN
    -- autoAck on a standard queue: claims as skipq.message_claim does and
    -- removes what it takes, or retains it on a queue with
    -- retainAckedSeconds (skipq.message_retain). receive_count is reported
    -- as it was before this delivery. On a traced queue each message gets
    -- its 'received' and 'acked' events (gone at once unless retained).
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND NOT x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT r.seconds INTO v_retain FROM skipq.queue_retention r WHERE r.queue_id = q.id;
    WITH walked AS (
        SELECT c.sequence, c.size
        FROM (SELECT r.queue_id, r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence
              FOR UPDATE SKIP LOCKED) r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = r.queue_id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > v_now)
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    )
    SELECT array_agg(w.sequence) INTO v_seqs FROM (
        SELECT w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
        FROM walked w
        WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
    WHERE w.n = 1 OR w.before < p_max_response_bytes;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;
    IF v_retain IS NOT NULL THEN
        RETURN QUERY
        WITH r AS (
            SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
                array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true)
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL
            FROM r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace'
            ORDER BY r.sequence, e.n
        )
        SELECT * FROM r;
        RETURN;
    END IF;
    RETURN QUERY
    WITH unready AS (
        DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
    ), gone AS (
        DELETE FROM skipq.messages m
        WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
        RETURNING m.*
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, e.type, v_now, p_key_id,
               CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', g.receive_count, 'visibleUntil', g.visible_at) END,
               CASE WHEN e.n = 2 THEN v_now END
        FROM gone g CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
        WHERE g.tags ? 'skipq.trace'
        ORDER BY g.sequence, e.n
    )
    SELECT * FROM gone;
END $$;
-- +goose StatementEnd
