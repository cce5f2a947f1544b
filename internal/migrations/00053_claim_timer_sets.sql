-- +goose Up
-- The standard claim (skipq.message_claim) files one timer set
-- (skipq.timer_sets, 00051) per claim statement instead of a timer per
-- claimed message: a claim of 100 wrote 100 rows of skipq.timers (about
-- 10 % of its instructions, 4 buffers and 2 WAL records a message). Every
-- worker that can run against this schema takes sets (00051 shipped them
-- to the worker one release ahead), so none leaves a set's messages in
-- flight. skipq.message_claim_queues claims through message_claim and so
-- files sets too; the FIFO claim (message_claim_grouped) is not changed
-- here. Same signature, same rows. The Down restores the previous body.
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
                SELECT w.row, row_number() OVER win AS n, sum(w.size::float8) OVER win - w.size AS before
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
        -- secret: 244 random bits (two version 4 UUIDs) drawn for this
        -- claim alone, stored nowhere but as the token of a claim of one
        -- (below). Each claimed message's lease token
        -- is SHA-256 of the secret and its sequence (unique across queues):
        -- one random draw per claim instead of two per message (a draw is
        -- OpenSSL's RAND_bytes, about 11,000 instructions; this SHA-256
        -- about 7,000). A token is as hard to guess as the secret, and the
        -- handles of one claim, which a shared claim hands to several
        -- receivers, reveal nothing of each other (finding the secret from
        -- them is a preimage search of SHA-256); a later claim of the same
        -- message draws another secret, so every lease has a new token. A
        -- claim of one message has no other handle to keep apart: its token
        -- is the secret itself, and the claim costs no more than before.
        SELECT coalesce(p_now, clock_timestamp()) AS now,
               coalesce(p_visibility_seconds, q.visibility_seconds) AS visibility_seconds,
               uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS secret
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
        -- The running sum (here and in the peek's) in float8, exact below
        -- 2^53 bytes: sum() of a bigint is a numeric, about 2,000
        -- instructions a row.
        SELECT w.ready_row, w.row, w.sequence FROM (
            SELECT w.ready_row, w.row, w.sequence, row_number() OVER win AS n, sum(w.size::float8) OVER win - w.size AS before
            FROM walked w
            WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n = 1 OR w.before < p_max_response_bytes
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(SELECT p.ready_row FROM picked p))
    ), timed AS (
        -- One timer for the whole claim, a set (skipq.timer_sets): its
        -- leases end together. A set that comes due fires only those of
        -- its messages still waiting for that moment (skipq.message_fire):
        -- one acked, released, extended (the extend files its own timer)
        -- or claimed again with a later lease is passed over. A claim of
        -- one writes a set of one too: that costs about 9,000 instructions
        -- more than a single timer (771,000 against 761,000 a claim), but
        -- a second insert that filed a single timer for claims of one, in
        -- this statement and so planned and started on every claim, cost
        -- 27,000 more than the set alone.
        INSERT INTO skipq.timer_sets (due_at, queue_id, sequences)
        SELECT t.now + make_interval(secs => t.visibility_seconds), q.id, ARRAY(SELECT p.sequence FROM picked p)
        FROM t
        WHERE EXISTS (SELECT 1 FROM picked p)
    ), claimed AS (
        UPDATE skipq.messages m
        SET visible_at        = t.now + make_interval(secs => t.visibility_seconds),
            receive_count     = m.receive_count + 1,
            first_received_at = coalesce(m.first_received_at, t.now),
            lease_token       = CASE WHEN p_max_messages = 1 THEN t.secret
                                     ELSE sha256(t.secret || int8send(m.sequence)) END,
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
                SELECT w.row, row_number() OVER win AS n, sum(w.size::float8) OVER win - w.size AS before
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
        -- secret: 244 random bits (two version 4 UUIDs) drawn for this
        -- claim alone, stored nowhere but as the token of a claim of one
        -- (below). Each claimed message's lease token
        -- is SHA-256 of the secret and its sequence (unique across queues):
        -- one random draw per claim instead of two per message (a draw is
        -- OpenSSL's RAND_bytes, about 11,000 instructions; this SHA-256
        -- about 7,000). A token is as hard to guess as the secret, and the
        -- handles of one claim, which a shared claim hands to several
        -- receivers, reveal nothing of each other (finding the secret from
        -- them is a preimage search of SHA-256); a later claim of the same
        -- message draws another secret, so every lease has a new token. A
        -- claim of one message has no other handle to keep apart: its token
        -- is the secret itself, and the claim costs no more than before.
        SELECT coalesce(p_now, clock_timestamp()) AS now,
               coalesce(p_visibility_seconds, q.visibility_seconds) AS visibility_seconds,
               uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS secret
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
        -- The running sum (here and in the peek's) in float8, exact below
        -- 2^53 bytes: sum() of a bigint is a numeric, about 2,000
        -- instructions a row.
        SELECT w.ready_row, w.row, w.sequence FROM (
            SELECT w.ready_row, w.row, w.sequence, row_number() OVER win AS n, sum(w.size::float8) OVER win - w.size AS before
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
            lease_token       = CASE WHEN p_max_messages = 1 THEN t.secret
                                     ELSE sha256(t.secret || int8send(m.sequence)) END,
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
