-- +goose Up
-- A send and a claim that cost less per message, and a standard claim
-- whose plans no longer depend on the statistics they were made with
-- (issue 29). Signatures, results and errors are unchanged; the Down
-- restores the previous bodies.
--
-- skipq.message_claim (claim and peek) and skipq.message_claim_and_delete
-- (autoAck) run generic plans kept for a connection's life. Made on
-- statistics of a drained table (one live row over a thousand pages, after
-- a vacuum), the walk probed each message through messages_queue_sent_idx,
-- whose third column is the sequence, so each probe read all of the
-- queue's entries, and the claim's delete of its ready rows and update of
-- its messages kept `sequence = ANY(...)` as a filter over all of the
-- queue's ready rows and messages: a claim of 100 behind 5,000 messages
-- read 4,753 buffers, now 1,082 (TestStandardClaimPlansIgnoreDrainedStatistics).
-- Each message is now found by a probe only the primary key serves in
-- order and locked at its address with its key checked; the rows the walk
-- locked are deleted and updated by address, a TID scan whatever the
-- statistics (as the FIFO claim has done since 00041). A message that
-- another transaction updated after the claim's snapshot is now skipped
-- by this claim, as a locked one is, where the lock by key followed it to
-- the newer version. On usual statistics the claim of 100 reads about 3
-- buffers a message fewer (no second descent of ready_pkey and
-- messages_pkey) and a claim of one runs 14 % fewer instructions.
--
-- skipq.message_insert sorts the positions before it builds the rows
-- instead of the built rows (each body was copied once more into the
-- sort), takes the common empty tags as a constant instead of parsing
-- them, lists the positions to send with an expression instead of a query
-- of its own, and fills the arrays that only keyed sends use on their
-- path only: 8 % fewer instructions for a send of 100, 11 % for a send of
-- one.

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
    -- So a message is found by a probe of its queue in sequence order
    -- between two bounds on its sequence, which only the primary key
    -- serves without a sort (sorts are off; an equality on the sequence
    -- would make the order moot, and a range open at one end would test
    -- every later entry of the page), and locked at that address with its
    -- key checked; the ready rows and messages the walk locked are then
    -- deleted and updated by address (a TID scan is their only plan). A row
    -- locked at its address cannot move; one that another transaction
    -- updated since this statement's snapshot fails the lock's recheck and
    -- is skipped, as a locked one is.
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
                                WHERE y.queue_id = q.id AND y.sequence >= r.sequence AND y.sequence <= r.sequence
                                ORDER BY y.sequence LIMIT 1)
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
        -- The lease starts when this statement runs, after its snapshot:
        -- v_now was read at the call's start, and a message that the worker
        -- readied in between (its delay just ended) would get a lease dated
        -- before it was available. t is read once (volatile: materialized).
        SELECT coalesce(p_now, clock_timestamp()) AS now,
               coalesce(p_visibility_seconds, q.visibility_seconds) AS visibility_seconds
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
                            WHERE y.queue_id = q.id AND y.sequence >= r.sequence AND y.sequence <= r.sequence
                            ORDER BY y.sequence LIMIT 1)
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
    -- The walk is skipq.message_claim's (which says why each message is
    -- found by a bounded probe of the primary key and then named by
    -- address); the rows it locks keep their addresses to this
    -- transaction's end, so the statements after it delete them by address
    -- too.
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
                            WHERE y.queue_id = q.id AND y.sequence >= r.sequence AND y.sequence <= r.sequence
                            ORDER BY y.sequence LIMIT 1)
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_insert(p_tenant text, p_queue text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_dedup_ids text[] DEFAULT NULL::text[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(pos integer, queue_id bigint, message_id text, sequence bigint, sent_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, outcome text)
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
    q         skipq.queues;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    -- Per position, for keyed messages only: the content hash, and what a
    -- live key or an earlier position decided.
    v_hash    bytea[];
    v_outcome text[] := array_fill('sent'::text, ARRAY[n]);
    -- A duplicate's first send (filled on the keyed path only).
    v_seq     bigint[];
    v_sent    timestamptz[];
    v_delayed timestamptz[];
    v_expires timestamptz[];
    v_first   integer;
    -- The idempotency key of each position: the client's messageId, or on
    -- a queue with content-based deduplication, for a message without
    -- one, 'content:' and its body's SHA-256 (v_content).
    v_keys    text[] := p_message_ids;
    v_keyed   boolean[] := p_keyed;
    v_content boolean[] := array_fill(false, ARRAY[n]);
    -- Positions keyed by an SQS MessageDeduplicationId (p_dedup_ids).
    v_dedup   boolean[] := array_fill(false, ARRAY[n]);
    -- The id a duplicate answers with: its first send's message's.
    v_dupid   text[] := p_message_ids;
    v_sent_pos integer[];
    k         skipq.dedup_keys;
    i         integer;
    -- A traced queue's trace ids, per position.
    v_trace   bigint[];
BEGIN
-- A send: stores a batch of messages in one queue (or answers for the
-- positions at fault: group_required, group_refused, conflict), with
-- idempotency keys (client messageId, content-based deduplication, SQS
-- MessageDeduplicationId) and, on a traced queue, each sent message's trace
-- id and 'sent' event. One implementation for the nodes
-- (internal/db/message_insert.go) and the SQL API (skipq.send,
-- skipq.enqueue). Returns a row per position: 'sent', 'duplicate' (with
-- the first send's id and times), or the fault.
    SELECT * INTO q FROM skipq.queues WHERE tenant = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Every message of a FIFO queue names a group, no message of a standard
    -- queue does; otherwise nothing is stored, and the positions at fault
    -- come back ('group_required', 'group_refused').
    IF (CASE WHEN q.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL) END) THEN
        RETURN QUERY
            SELECT x, q.id, p_message_ids[x], NULL::bigint, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
                   CASE WHEN q.fifo THEN 'group_required' ELSE 'group_refused' END
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = q.fifo ORDER BY x;
        RETURN;
    END IF;

    IF EXISTS (SELECT 1 FROM skipq.queue_trace t WHERE t.queue_id = q.id) THEN
        -- A traced queue: each message gets a trace id in its tags, and its
        -- first event. A message keyed by a client messageId gets the id
        -- after it is stored, as its content hash covers its tags and a
        -- resend must stay a duplicate; the others carry it from the insert
        -- (no second write).
        v_trace := ARRAY(SELECT nextval('skipq.trace_sequence') FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        p_tags := ARRAY(SELECT CASE WHEN p_keyed[x] THEN p_tags[x]
                                    ELSE (p_tags[x]::jsonb || jsonb_build_object('skipq.trace', v_trace[x]::text))::text END
                        FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    END IF;

    IF q.content_based_dedup AND NOT (true = ALL(p_keyed)) THEN
        v_content := ARRAY(SELECT NOT p_keyed[x] FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keys := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN p_message_ids[x]
                        ELSE 'content:' || encode(sha256(substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x])), 'hex') END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keyed := array_fill(true, ARRAY[n]);
    END IF;

    -- An SQS MessageDeduplicationId keys its message in a
    -- space of its own, 'dedup/' and the id ('/' is in no native messageId),
    -- and overrides content-based deduplication. Its hash is the key's own,
    -- so a resend with any other content is a duplicate, never a conflict;
    -- a duplicate answers with the first send's (server) messageId.
    IF cardinality(array_remove(p_dedup_ids, NULL)) > 0 THEN
        v_dedup := ARRAY(SELECT p_dedup_ids[x] IS NOT NULL FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keys := ARRAY(SELECT CASE WHEN v_dedup[x] THEN 'dedup/' || p_dedup_ids[x] ELSE v_keys[x] END
                        FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keyed := ARRAY(SELECT v_keyed[x] OR v_dedup[x] FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    END IF;

    IF true = ANY(v_keyed) THEN
        v_seq := array_fill(NULL::bigint, ARRAY[n]);
        v_sent := array_fill(NULL::timestamptz, ARRAY[n]);
        v_delayed := v_sent;
        v_expires := v_sent;
        -- Senders of the same key are serialized until commit, in the
        -- order of the locks' numbers so that two batches cannot deadlock;
        -- each statement below takes a new snapshot (READ COMMITTED) and
        -- so sees a key that the sender before committed.
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended(q.id::text || '/' || v_keys[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE v_keyed[x] ORDER BY 1) l;
        -- A content key's hash is the body's alone (SQS's rule): a resend
        -- with other metadata, tags or clientId is still a duplicate.
        v_hash := ARRAY(
            SELECT CASE WHEN v_dedup[x] THEN sha256(convert_to(v_keys[x], 'UTF8'))
                        WHEN v_content[x] THEN sha256(substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]))
                        WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        -- A live key (inside its window, or its message still in the
        -- queue) answers for the first position that carries it.
        FOR k IN
            SELECT d.* FROM skipq.dedup_keys d
            WHERE d.queue_id = q.id
              AND d.message_id = ANY(ARRAY(SELECT v_keys[x] FROM generate_subscripts(p_message_ids, 1) x
                                           WHERE v_keyed[x]))
              AND (d.window_ends > v_now OR EXISTS (
                  SELECT 1 FROM skipq.messages m
                  WHERE m.queue_id = d.queue_id AND m.message_id = coalesce(d.result_message_id, d.message_id)))
        LOOP
            i := array_position(v_keys, k.message_id);
            v_dupid[i] := coalesce(k.result_message_id, k.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = k.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_seq[i] := k.sequence; v_sent[i] := k.sent_at;
            v_delayed[i] := k.delayed_to; v_expires[i] := k.expires_at;
        END LOOP;
        -- A key repeated within the call: each later position is a
        -- duplicate (or a conflict) of the first, and answers as it does.
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT v_keyed[i];
            v_first := array_position(v_keys, v_keys[i]);
            CONTINUE WHEN v_first = i;
            v_dupid[i] := v_dupid[v_first];
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

    -- An expression, not a query: a statement of its own cost 5 % of a
    -- send of one.
    v_sent_pos := array_positions(v_outcome, 'sent');
    IF q.fifo THEN
        -- Waits for earlier senders of the groups to commit, so the
        -- sequences drawn below follow theirs (skipq.group_enter).
        PERFORM skipq.group_enter(array_fill(q.id, ARRAY[cardinality(v_sent_pos)]),
                                  ARRAY(SELECT p_group_ids[x] FROM unnest(v_sent_pos) x));
    END IF;
    RETURN QUERY
    WITH inserted AS (
        -- Sequences are drawn in position order: a batch's messages are
        -- delivered in the order they were given, and the k-th sequence is
        -- the k-th position sent. The positions are sorted before the
        -- rows are built, and the nested loop that builds them keeps that
        -- order: sorting the built rows copied every body once more
        -- (4 % of a send of 100).
        INSERT INTO skipq.messages AS msg (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready, group_id)
        SELECT q.id, p_message_ids[x], p_client_ids[x], p_metadatas[x],
               substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
               -- No tags (the common case) skips parsing them.
               p_body_binaries[x], CASE WHEN p_tags[x] = '{}' THEN '{}'::jsonb ELSE p_tags[x]::jsonb END,
               v_now,
               v_now + make_interval(secs => p.delay_seconds),
               CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
               CASE WHEN p.expiration_seconds > 0
                    THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
               p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0, p_group_ids[x]
        FROM (SELECT x FROM unnest(v_sent_pos) x ORDER BY x) x
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

    IF v_trace IS NOT NULL THEN
        -- The messages just sent, read back by their ids: the keyed ones
        -- get their trace id, each its 'sent' event.
        WITH sent AS (
            SELECT x AS pos, m.queue_id, m.message_id, m.sequence
            FROM unnest(v_sent_pos) x
            CROSS JOIN LATERAL (SELECT m.queue_id, m.message_id, m.sequence FROM skipq.messages m
                                WHERE m.queue_id = q.id AND m.message_id = p_message_ids[x]) m
        ), keyed AS (
            UPDATE skipq.messages m SET tags = m.tags || jsonb_build_object('skipq.trace', v_trace[s.pos]::text)
            FROM sent s
            WHERE p_keyed[s.pos] AND m.queue_id = s.queue_id AND m.sequence = s.sequence
        )
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id)
        SELECT v_trace[s.pos], s.queue_id, s.message_id, 'sent', v_now, p_key_ids[s.pos]
        FROM sent s ORDER BY s.sequence;
    END IF;

    IF v_hash IS NOT NULL THEN
        -- The keys of the messages just sent, read back by their ids. A key
        -- still present but no longer live (window over, message gone) is
        -- replaced.
        INSERT INTO skipq.dedup_keys AS d (
            queue_id, message_id, content_hash, sequence, sent_at, delayed_to, expires_at, window_ends,
            result_message_id)
        SELECT m.queue_id, v_keys[x], v_hash[x], m.sequence, m.sent_at, m.delayed_to, m.expires_at,
               m.sent_at + make_interval(secs => q.dedup_window_seconds),
               CASE WHEN v_content[x] OR v_dedup[x] THEN m.message_id END
        FROM generate_subscripts(p_message_ids, 1) x
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m
                            WHERE m.message_id = p_message_ids[x] AND m.queue_id = q.id) m
        WHERE v_keyed[x] AND v_outcome[x] = 'sent'
        ON CONFLICT ON CONSTRAINT dedup_keys_pkey DO UPDATE SET
            content_hash = excluded.content_hash, sequence = excluded.sequence,
            sent_at = excluded.sent_at, delayed_to = excluded.delayed_to,
            expires_at = excluded.expires_at, window_ends = excluded.window_ends,
            result_message_id = excluded.result_message_id;
        -- Duplicates: of a live key (its send), or of an earlier position
        -- (the message it sent just now).
        RETURN QUERY
        SELECT x, q.id, v_dupid[x], coalesce(v_seq[x], m.sequence), coalesce(v_sent[x], m.sent_at),
               CASE WHEN v_seq[x] IS NULL THEN m.delayed_to ELSE v_delayed[x] END,
               CASE WHEN v_seq[x] IS NULL THEN m.expires_at ELSE v_expires[x] END,
               'duplicate'::text
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN LATERAL (SELECT * FROM skipq.messages m
                           WHERE m.message_id = v_dupid[x] AND m.queue_id = q.id AND v_seq[x] IS NULL) m ON true
        WHERE v_outcome[x] = 'duplicate';
    END IF;
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_insert(p_tenant text, p_queue text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_dedup_ids text[] DEFAULT NULL::text[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(pos integer, queue_id bigint, message_id text, sequence bigint, sent_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, outcome text)
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
    -- The idempotency key of each position: the client's messageId, or on
    -- a queue with content-based deduplication, for a message without
    -- one, 'content:' and its body's SHA-256 (v_content).
    v_keys    text[] := p_message_ids;
    v_keyed   boolean[] := p_keyed;
    v_content boolean[] := array_fill(false, ARRAY[n]);
    -- Positions keyed by an SQS MessageDeduplicationId (p_dedup_ids).
    v_dedup   boolean[] := array_fill(false, ARRAY[n]);
    -- The id a duplicate answers with: its first send's message's.
    v_dupid   text[] := p_message_ids;
    v_sent_pos integer[];
    k         skipq.dedup_keys;
    i         integer;
    -- A traced queue's trace ids, per position.
    v_trace   bigint[];
BEGIN
-- A send: stores a batch of messages in one queue (or answers for the
-- positions at fault: group_required, group_refused, conflict), with
-- idempotency keys (client messageId, content-based deduplication, SQS
-- MessageDeduplicationId) and, on a traced queue, each sent message's trace
-- id and 'sent' event. One implementation for the nodes
-- (internal/db/message_insert.go) and the SQL API (skipq.send,
-- skipq.enqueue). Returns a row per position: 'sent', 'duplicate' (with
-- the first send's id and times), or the fault.
    SELECT * INTO q FROM skipq.queues WHERE tenant = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Every message of a FIFO queue names a group, no message of a standard
    -- queue does; otherwise nothing is stored, and the positions at fault
    -- come back ('group_required', 'group_refused').
    IF (CASE WHEN q.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL) END) THEN
        RETURN QUERY
            SELECT x, q.id, p_message_ids[x], NULL::bigint, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
                   CASE WHEN q.fifo THEN 'group_required' ELSE 'group_refused' END
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = q.fifo ORDER BY x;
        RETURN;
    END IF;

    IF EXISTS (SELECT 1 FROM skipq.queue_trace t WHERE t.queue_id = q.id) THEN
        -- A traced queue: each message gets a trace id in its tags, and its
        -- first event. A message keyed by a client messageId gets the id
        -- after it is stored, as its content hash covers its tags and a
        -- resend must stay a duplicate; the others carry it from the insert
        -- (no second write).
        v_trace := ARRAY(SELECT nextval('skipq.trace_sequence') FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        p_tags := ARRAY(SELECT CASE WHEN p_keyed[x] THEN p_tags[x]
                                    ELSE (p_tags[x]::jsonb || jsonb_build_object('skipq.trace', v_trace[x]::text))::text END
                        FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    END IF;

    IF q.content_based_dedup AND NOT (true = ALL(p_keyed)) THEN
        v_content := ARRAY(SELECT NOT p_keyed[x] FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keys := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN p_message_ids[x]
                        ELSE 'content:' || encode(sha256(substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x])), 'hex') END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keyed := array_fill(true, ARRAY[n]);
    END IF;

    -- An SQS MessageDeduplicationId keys its message in a
    -- space of its own, 'dedup/' and the id ('/' is in no native messageId),
    -- and overrides content-based deduplication. Its hash is the key's own,
    -- so a resend with any other content is a duplicate, never a conflict;
    -- a duplicate answers with the first send's (server) messageId.
    IF cardinality(array_remove(p_dedup_ids, NULL)) > 0 THEN
        v_dedup := ARRAY(SELECT p_dedup_ids[x] IS NOT NULL FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keys := ARRAY(SELECT CASE WHEN v_dedup[x] THEN 'dedup/' || p_dedup_ids[x] ELSE v_keys[x] END
                        FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keyed := ARRAY(SELECT v_keyed[x] OR v_dedup[x] FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    END IF;

    IF true = ANY(v_keyed) THEN
        -- Senders of the same key are serialized until commit, in the
        -- order of the locks' numbers so that two batches cannot deadlock;
        -- each statement below takes a new snapshot (READ COMMITTED) and
        -- so sees a key that the sender before committed.
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended(q.id::text || '/' || v_keys[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE v_keyed[x] ORDER BY 1) l;
        -- A content key's hash is the body's alone (SQS's rule): a resend
        -- with other metadata, tags or clientId is still a duplicate.
        v_hash := ARRAY(
            SELECT CASE WHEN v_dedup[x] THEN sha256(convert_to(v_keys[x], 'UTF8'))
                        WHEN v_content[x] THEN sha256(substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]))
                        WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        -- A live key (inside its window, or its message still in the
        -- queue) answers for the first position that carries it.
        FOR k IN
            SELECT d.* FROM skipq.dedup_keys d
            WHERE d.queue_id = q.id
              AND d.message_id = ANY(ARRAY(SELECT v_keys[x] FROM generate_subscripts(p_message_ids, 1) x
                                           WHERE v_keyed[x]))
              AND (d.window_ends > v_now OR EXISTS (
                  SELECT 1 FROM skipq.messages m
                  WHERE m.queue_id = d.queue_id AND m.message_id = coalesce(d.result_message_id, d.message_id)))
        LOOP
            i := array_position(v_keys, k.message_id);
            v_dupid[i] := coalesce(k.result_message_id, k.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = k.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_seq[i] := k.sequence; v_sent[i] := k.sent_at;
            v_delayed[i] := k.delayed_to; v_expires[i] := k.expires_at;
        END LOOP;
        -- A key repeated within the call: each later position is a
        -- duplicate (or a conflict) of the first, and answers as it does.
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT v_keyed[i];
            v_first := array_position(v_keys, v_keys[i]);
            CONTINUE WHEN v_first = i;
            v_dupid[i] := v_dupid[v_first];
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
    IF q.fifo THEN
        -- Waits for earlier senders of the groups to commit, so the
        -- sequences drawn below follow theirs (skipq.group_enter).
        PERFORM skipq.group_enter(array_fill(q.id, ARRAY[cardinality(v_sent_pos)]),
                                  ARRAY(SELECT p_group_ids[x] FROM unnest(v_sent_pos) x));
    END IF;
    RETURN QUERY
    WITH inserted AS (
        -- Sequences are drawn in position order (ORDER BY x): a batch's
        -- messages are delivered in the order they were given, and the
        -- k-th sequence is the k-th position sent.
        INSERT INTO skipq.messages AS msg (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready, group_id)
        SELECT q.id, p_message_ids[x], p_client_ids[x], p_metadatas[x],
               substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
               p_body_binaries[x], p_tags[x]::jsonb,
               v_now,
               v_now + make_interval(secs => p.delay_seconds),
               CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
               CASE WHEN p.expiration_seconds > 0
                    THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
               p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0, p_group_ids[x]
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

    IF v_trace IS NOT NULL THEN
        -- The messages just sent, read back by their ids: the keyed ones
        -- get their trace id, each its 'sent' event.
        WITH sent AS (
            SELECT x AS pos, m.queue_id, m.message_id, m.sequence
            FROM unnest(v_sent_pos) x
            CROSS JOIN LATERAL (SELECT m.queue_id, m.message_id, m.sequence FROM skipq.messages m
                                WHERE m.queue_id = q.id AND m.message_id = p_message_ids[x]) m
        ), keyed AS (
            UPDATE skipq.messages m SET tags = m.tags || jsonb_build_object('skipq.trace', v_trace[s.pos]::text)
            FROM sent s
            WHERE p_keyed[s.pos] AND m.queue_id = s.queue_id AND m.sequence = s.sequence
        )
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id)
        SELECT v_trace[s.pos], s.queue_id, s.message_id, 'sent', v_now, p_key_ids[s.pos]
        FROM sent s ORDER BY s.sequence;
    END IF;

    IF v_hash IS NOT NULL THEN
        -- The keys of the messages just sent, read back by their ids. A key
        -- still present but no longer live (window over, message gone) is
        -- replaced.
        INSERT INTO skipq.dedup_keys AS d (
            queue_id, message_id, content_hash, sequence, sent_at, delayed_to, expires_at, window_ends,
            result_message_id)
        SELECT m.queue_id, v_keys[x], v_hash[x], m.sequence, m.sent_at, m.delayed_to, m.expires_at,
               m.sent_at + make_interval(secs => q.dedup_window_seconds),
               CASE WHEN v_content[x] OR v_dedup[x] THEN m.message_id END
        FROM generate_subscripts(p_message_ids, 1) x
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m
                            WHERE m.message_id = p_message_ids[x] AND m.queue_id = q.id) m
        WHERE v_keyed[x] AND v_outcome[x] = 'sent'
        ON CONFLICT ON CONSTRAINT dedup_keys_pkey DO UPDATE SET
            content_hash = excluded.content_hash, sequence = excluded.sequence,
            sent_at = excluded.sent_at, delayed_to = excluded.delayed_to,
            expires_at = excluded.expires_at, window_ends = excluded.window_ends,
            result_message_id = excluded.result_message_id;
        -- Duplicates: of a live key (its send), or of an earlier position
        -- (the message it sent just now).
        RETURN QUERY
        SELECT x, q.id, v_dupid[x], coalesce(v_seq[x], m.sequence), coalesce(v_sent[x], m.sent_at),
               CASE WHEN v_seq[x] IS NULL THEN m.delayed_to ELSE v_delayed[x] END,
               CASE WHEN v_seq[x] IS NULL THEN m.expires_at ELSE v_expires[x] END,
               'duplicate'::text
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN LATERAL (SELECT * FROM skipq.messages m
                           WHERE m.message_id = v_dupid[x] AND m.queue_id = q.id AND v_seq[x] IS NULL) m ON true
        WHERE v_outcome[x] = 'duplicate';
    END IF;
END $$;
-- +goose StatementEnd
