-- +goose Up
-- A group's claim that makes its copies (skipq.topic_copies_make) returns
-- them with their stored body in place: the node read the bodies of the
-- claimed copies after the claim with a statement of its own
-- (TopicBodies), a second round trip on every claim of a topic group.
-- Changed body (same signature): skipq.topic_copies_make.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_copies_make(q skipq.queues, p_body_ids bigint[], p_max integer, p_now timestamp with time zone, p_visibility_seconds integer, p_max_response_bytes bigint, p_message_overhead bigint) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- Called by skipq.message_claim and skipq.topic_copies_ready only,
    -- whose plan settings (no sorts, joins, scans but the ones meant;
    -- generic plans) apply here too: a SET clause of its own would be set
    -- and reset on every call.
    --
    -- The copies in queue q of the published messages p_body_ids, in that
    -- order, or, with p_body_ids NULL, of up to p_max ids taken from the
    -- queue's oldest pending rows that no other transaction holds, in
    -- order: as many rows as p_max ids fill when full (32 each), locked
    -- FOR UPDATE SKIP LOCKED, each deleted when taken whole, the last cut
    -- from the front otherwise. Every row locked is taken from (the rows
    -- before the last hold fewer than p_max ids together): a row locked
    -- and not taken from would stay hidden from the other claims until
    -- this one commits. A copy is a message row as a
    -- publish used to write it (empty body, the stored one named by its
    -- skipq.body tag; the queue's defaults where the publish gave none),
    -- sent_at its publish. With p_visibility_seconds the copies are a
    -- claim's: leased to the caller as skipq.message_claim leases (one
    -- secret, each token SHA-256 of it and the sequence, the secret itself
    -- for a claim of one; one timer set), within p_max_response_bytes as
    -- that claim measures (the first always fits), and returned with
    -- their stored body in place and without the skipq.body tag, as
    -- skipq.message_claim_queues returns a copy it filled (so the node
    -- reads no bodies after the claim); the copies past the budget are
    -- made ready. Without it every copy is made
    -- ready (a ready row each) and none is returned. A copy that expired
    -- before it was made is not made. A copy whose message id the queue
    -- already holds gets a fresh one (UUIDv7), as a message moved into a
    -- queue holding its id does: the publish drew the id, but a copy of
    -- another group may have moved here (a dead-letter queue or requeue
    -- target subscribed to the same topic) while this one was pending.
    -- One probe of messages_message_id_queue_key a copy; the ON CONFLICT
    -- is for an insert of the id not committed yet.
    RETURN QUERY
    WITH t AS (
        SELECT coalesce(p_now, clock_timestamp()) AS now,
               uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS secret
    ), locked AS (
        SELECT p.ctid AS row, p.body_ids FROM skipq.topic_pending p
        WHERE p_body_ids IS NULL AND p.queue_id = q.id
        ORDER BY p.id LIMIT (p_max + 31) / 32
        FOR UPDATE SKIP LOCKED
    ), taken AS (
        -- Each row's ids taken: as many as the rows before it left room
        -- for (before: their ids, in the order locked; any order would
        -- do, each row is left room for at least one).
        SELECT k.row, k.body_ids[:p_max - k.before] AS ids, k.before + cardinality(k.body_ids) > p_max AS cut
        FROM (SELECT k.row, k.body_ids,
                     (sum(cardinality(k.body_ids)) OVER w - cardinality(k.body_ids))::integer AS before
              FROM locked k WINDOW w AS (ROWS UNBOUNDED PRECEDING)) k
    ), cut AS (
        UPDATE skipq.topic_pending p
        SET body_ids = p.body_ids[(SELECT cardinality(k.ids) FROM taken k WHERE k.cut) + 1:]
        WHERE p.ctid = (SELECT k.row FROM taken k WHERE k.cut)
    ), whole AS (
        DELETE FROM skipq.topic_pending p
        WHERE p.ctid = ANY(ARRAY(SELECT k.row FROM taken k WHERE NOT k.cut))
    ), drawn AS (
        SELECT u.k, b.*, nextval('skipq.message_sequence') AS sequence,
               CASE WHEN b.expiration_seconds = 0
                         OR (b.expiration_seconds < 0 AND q.expiration_seconds = 0) THEN NULL
                    ELSE b.published_at + make_interval(secs => CASE WHEN b.expiration_seconds < 0
                                                                     THEN q.expiration_seconds
                                                                     ELSE b.expiration_seconds END)
               END AS expires_at,
               -- skipq.message_wire_size's measure, written out on the
               -- stored body's size: the call cost 1.9 % more a claim of
               -- 100 (callgrind).
               CASE WHEN b.body_binary THEN (b.size + 2) / 3 * 4 ELSE b.size END
                   + octet_length(b.metadata) + octet_length(b.tags::text) + octet_length(b.message_id)
                   + octet_length(b.client_id) + p_message_overhead AS wire
        FROM unnest(coalesce(p_body_ids, ARRAY(SELECT u.id FROM taken k CROSS JOIN LATERAL unnest(k.ids) u(id))))
             WITH ORDINALITY AS u(id, k)
        CROSS JOIN LATERAL (
            SELECT d.message_id, c.client_id, c.metadata, c.body_binary, c.tags, d.published_at,
                   c.expiration_seconds, c.max_receive_count, c.dead_letter_queue,
                   octet_length(d.body)::bigint AS size
            FROM skipq.topic_bodies d JOIN skipq.topic_copy_parts c ON c.body_id = d.id
            WHERE d.id = u.id) b
    ), live AS (
        SELECT d.*, p_visibility_seconds IS NOT NULL
                    AND (row_number() OVER w = 1
                         OR sum(d.wire::float8) OVER w - d.wire < p_max_response_bytes) AS leased
        FROM drawn d
        WHERE d.expires_at IS NULL OR d.expires_at > (SELECT t.now FROM t)
        WINDOW w AS (ORDER BY d.k ROWS UNBOUNDED PRECEDING)
    ), made AS (
        INSERT INTO skipq.messages AS m (
            queue_id, sequence, message_id, client_id, metadata, body, body_binary, tags, sent_at, visible_at,
            expires_at, receive_count, first_received_at, max_receive_count, dead_letter_queue, lease_token, ready)
        SELECT q.id, l.sequence,
               CASE WHEN (SELECT x.sequence FROM skipq.messages x
                          WHERE x.message_id = l.message_id AND x.queue_id = q.id LIMIT 1) IS NULL
                    THEN l.message_id ELSE skipq.uuid_v7()::text END,
               l.client_id, l.metadata, '\x'::bytea, l.body_binary, l.tags,
               l.published_at,
               CASE WHEN l.leased THEN t.now + make_interval(secs => p_visibility_seconds) ELSE l.published_at END,
               l.expires_at,
               CASE WHEN l.leased THEN 1 ELSE 0 END,
               CASE WHEN l.leased THEN t.now END,
               CASE WHEN l.max_receive_count > 0 THEN l.max_receive_count
                    WHEN q.max_receive_count > 0 THEN q.max_receive_count
                    ELSE -l.max_receive_count END,
               coalesce(l.dead_letter_queue, q.dead_letter_queue),
               CASE WHEN NOT l.leased THEN NULL
                    WHEN p_max = 1 THEN t.secret
                    ELSE sha256(t.secret || int8send(l.sequence)) END,
               NOT l.leased
        FROM live l CROSS JOIN t
        ORDER BY l.k
        ON CONFLICT (message_id, queue_id) WHERE message_id IS NOT NULL DO NOTHING
        RETURNING m.*
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT c.queue_id, c.sequence FROM made c WHERE c.ready
    ), timed AS (
        INSERT INTO skipq.timer_sets (due_at, queue_id, sequences)
        SELECT t.now + make_interval(secs => p_visibility_seconds), q.id,
               ARRAY(SELECT c.sequence FROM made c WHERE NOT c.ready)
        FROM t
        WHERE EXISTS (SELECT 1 FROM made c WHERE NOT c.ready)
    )
    -- The row as stored but for body and tags: the body by a probe of
    -- its primary key, as the node's statement found it. (A join with
    -- live, which read the bodies already, is a nested loop over two
    -- CTE scans here: it cost 20 % more a claim of 100 than the probes,
    -- callgrind.)
    SELECT c.queue_id, c.sequence, c.message_id, c.client_id, c.metadata,
           (SELECT d.body FROM skipq.topic_bodies d WHERE d.id = (c.tags ->> 'skipq.body')::bigint), c.body_binary,
           c.tags - 'skipq.body', c.sent_at, c.visible_at, c.delayed_to, c.expires_at, c.receive_count,
           c.first_received_at, c.max_receive_count, c.dead_letter_queue, c.re_routed_from, c.dead_lettered_at,
           c.lease_token, c.ready, c.group_id
    FROM made c
    WHERE NOT c.ready ORDER BY c.sequence;
END $$;
-- +goose StatementEnd

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
    v_n    bigint;
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
    -- reads them unchanged and unlocked (after making the queue's pending
    -- topic copies ready, below); NULL, the previous release's call,
    -- claims a standard queue and returns nothing from a FIFO one;
    -- 'claim_pending_first' is a claim that makes a topic group's pending
    -- copies without walking when it has no ready message (below). On a
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
            p_max_messages, coalesce(p_max_per_group, 1), p_max_response_bytes, p_message_overhead,
            CASE WHEN p_mode = 'claim_pending_first' THEN 'claim' ELSE p_mode END, p_key_id);
        RETURN;
    END IF;
    -- A topic group's pending copies (skipq.topic_pending) are made when
    -- the walk of ready messages comes back short, or in its place when
    -- the caller asks ('claim_pending_first', below): by a claim, already
    -- leased to it, as many as it still may take (measured against the
    -- response budget apart from the walk's messages, so an answer can
    -- exceed it); for autoAck and peeks, up to 32 as ready messages
    -- that the walk then takes (a peek makes them first: it takes
    -- nothing; autoAck when its walk found nothing). A queue without
    -- pending rows pays one probe of an empty index range.
    IF p_mode = 'delete' THEN
        RETURN QUERY SELECT d.* FROM skipq.message_claim_and_delete(p_tenant, p_queue, p_now, p_max_messages,
            p_max_response_bytes, p_message_overhead, p_key_id) d ORDER BY d.sequence;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        -- (Two IFs: a condition with a subquery is a statement, started
        -- whatever the other operand of an AND.)
        IF v_n = 0 THEN
            IF EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) THEN
                PERFORM skipq.topic_copies_make(q, NULL, least(p_max_messages, 32), v_now, NULL, NULL, 0);
                RETURN QUERY SELECT d.* FROM skipq.message_claim_and_delete(p_tenant, p_queue, p_now,
                    p_max_messages, p_max_response_bytes, p_message_overhead, p_key_id) d ORDER BY d.sequence;
            END IF;
        END IF;
        RETURN;
    END IF;
    IF p_mode = 'peek' THEN
        IF EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) THEN
            PERFORM skipq.topic_copies_make(q, NULL, least(p_max_messages, 32), v_now, NULL, NULL, 0);
        END IF;
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
    -- A group's walk of ready rows, mostly empty there, costs about half
    -- as much as making the copies (the statement's start-up, about what
    -- a claim of one costs besides): a node that saw a queue's claims
    -- return topic copies asks for its pending copies first, and this
    -- claim makes them without the walk when the queue has no ready row
    -- (a group's copies made at claim have none, so the probe walks no
    -- dead entries), in one statement with the probe for pending rows.
    -- Ready messages (retries, released and replayed copies, those the
    -- worker made ready) still come first, in sequence order, as in a
    -- plain claim. A claim that made copies returns them, even fewer than
    -- asked (there is no ready message to add); otherwise it claims as a
    -- plain claim does, which pays one comparison of the mode for it.
    IF p_mode = 'claim_pending_first' THEN
        IF NOT EXISTS (SELECT 1 FROM skipq.ready r WHERE r.queue_id = q.id)
           AND EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) THEN
            RETURN QUERY SELECT * FROM skipq.topic_copies_make(q, NULL, p_max_messages, p_now,
                coalesce(p_visibility_seconds, q.visibility_seconds), p_max_response_bytes, p_message_overhead);
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n > 0 THEN
                RETURN;
            END IF;
        END IF;
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
    GET DIAGNOSTICS v_n = ROW_COUNT;
    -- Pending copies after a walk that came back short.
    IF v_n < p_max_messages THEN
        IF EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) THEN
            RETURN QUERY SELECT * FROM skipq.topic_copies_make(q, NULL, p_max_messages - v_n::integer, p_now,
                coalesce(p_visibility_seconds, q.visibility_seconds), p_max_response_bytes, p_message_overhead);
        END IF;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.message_claim_queues(p_now timestamp with time zone, p_tenants text[], p_queues text[], p_max_messages integer[], p_visibility_seconds integer[], p_key_ids bigint[], p_max_response_bytes bigint[], p_message_overheads bigint[], p_modes text[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    -- PL/pgSQL, not SQL: a SQL function with SET clauses is never inlined,
    -- and its query was planned on every call (about 1 M instructions);
    -- PL/pgSQL keeps one plan for the session, which the settings hold to
    -- the same probes.
    --
    -- Claim i takes up to p_max_messages[i] of queue p_queues[i] as
    -- skipq.message_claim does (at most one message of a FIFO group),
    -- under p_key_ids[i], in mode p_modes[i] ('claim' or
    -- 'claim_pending_first'; NULL, or p_modes NULL: 'claim'); rows in
    -- claim order, each claim's in answer
    -- order. A topic copy comes with its stored body in place of its
    -- empty one and without the tag that named it (one primary-key probe
    -- of skipq.topic_bodies: the settings keep the planner from joining
    -- the whole table); a copy whose body is gone keeps both.
    RETURN QUERY
    SELECT k.claim::integer, m.queue_id, m.sequence, m.message_id, m.client_id, m.metadata,
           coalesce(b.body, m.body), m.body_binary,
           CASE WHEN b.body IS NULL THEN m.tags ELSE m.tags - 'skipq.body' END,
           m.sent_at, m.visible_at, m.delayed_to, m.expires_at, m.receive_count, m.first_received_at,
           m.max_receive_count, m.dead_letter_queue, m.re_routed_from, m.dead_lettered_at, m.lease_token, m.ready,
           m.group_id
    FROM unnest(p_tenants, p_queues, p_max_messages, p_visibility_seconds, p_key_ids, p_max_response_bytes,
                p_message_overheads, p_modes)
             WITH ORDINALITY AS k(tenant, queue, max_messages, visibility_seconds, key_id, max_response_bytes,
                                  message_overhead, mode, claim)
    CROSS JOIN LATERAL skipq.message_claim(k.tenant, k.queue, p_now, k.visibility_seconds, k.max_messages,
        k.max_response_bytes, k.message_overhead, k.key_id, 1, coalesce(k.mode, 'claim')) WITH ORDINALITY AS m
    LEFT JOIN LATERAL (SELECT d.body FROM skipq.topic_bodies d
                       WHERE m.tags ? 'skipq.body' AND d.id = (m.tags ->> 'skipq.body')::bigint) b ON true
    ORDER BY k.claim, m.ordinality;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_queues(p_now timestamp with time zone, p_tenants text[], p_queues text[], p_max_messages integer[], p_visibility_seconds integer[], p_key_ids bigint[], p_max_response_bytes bigint[], p_message_overheads bigint[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    -- The previous release's call: every claim a plain 'claim'.
    RETURN QUERY SELECT * FROM skipq.message_claim_queues(p_now, p_tenants, p_queues, p_max_messages,
        p_visibility_seconds, p_key_ids, p_max_response_bytes, p_message_overheads, NULL::text[]);
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
REVOKE ALL ON FUNCTION skipq.message_claim_queues(timestamptz, text[], text[], integer[], integer[], bigint[], bigint[], bigint[], text[]) FROM PUBLIC;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_copies_make(q skipq.queues, p_body_ids bigint[], p_max integer, p_now timestamp with time zone, p_visibility_seconds integer, p_max_response_bytes bigint, p_message_overhead bigint) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- Called by skipq.message_claim and skipq.topic_copies_ready only,
    -- whose plan settings (no sorts, joins, scans but the ones meant;
    -- generic plans) apply here too: a SET clause of its own would be set
    -- and reset on every call.
    --
    -- The copies in queue q of the published messages p_body_ids, in that
    -- order, or, with p_body_ids NULL, of up to p_max ids taken from the
    -- queue's oldest pending row that no other transaction holds (locked
    -- FOR UPDATE SKIP LOCKED, deleted when taken whole, cut from the front
    -- otherwise; one row, so that a claim locks no row it does not take
    -- from: such a row would stay hidden from the others until it
    -- commits). A copy is a message row as a
    -- publish used to write it (empty body, the stored one named by its
    -- skipq.body tag; the queue's defaults where the publish gave none),
    -- sent_at its publish. With p_visibility_seconds the copies are a
    -- claim's: leased to the caller as skipq.message_claim leases (one
    -- secret, each token SHA-256 of it and the sequence, the secret itself
    -- for a claim of one; one timer set), within p_max_response_bytes as
    -- that claim measures (the first always fits), and returned; the
    -- copies past the budget are made ready. Without it every copy is made
    -- ready (a ready row each) and none is returned. A copy that expired
    -- before it was made is not made. A copy whose message id the queue
    -- already holds gets a fresh one (UUIDv7), as a message moved into a
    -- queue holding its id does: the publish drew the id, but a copy of
    -- another group may have moved here (a dead-letter queue or requeue
    -- target subscribed to the same topic) while this one was pending.
    -- One probe of messages_message_id_queue_key a copy; the ON CONFLICT
    -- is for an insert of the id not committed yet.
    RETURN QUERY
    WITH t AS (
        SELECT coalesce(p_now, clock_timestamp()) AS now,
               uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS secret
    ), taken AS (
        SELECT p.ctid AS row, p.body_ids FROM skipq.topic_pending p
        WHERE p_body_ids IS NULL AND p.queue_id = q.id
        ORDER BY p.id LIMIT 1
        FOR UPDATE SKIP LOCKED
    ), cut AS (
        UPDATE skipq.topic_pending p SET body_ids = p.body_ids[p_max + 1:]
        WHERE p.ctid = ANY(ARRAY(SELECT k.row FROM taken k WHERE cardinality(k.body_ids) > p_max))
    ), whole AS (
        DELETE FROM skipq.topic_pending p
        WHERE p.ctid = ANY(ARRAY(SELECT k.row FROM taken k WHERE cardinality(k.body_ids) <= p_max))
    ), drawn AS (
        SELECT u.k, b.*, nextval('skipq.message_sequence') AS sequence,
               CASE WHEN b.expiration_seconds = 0
                         OR (b.expiration_seconds < 0 AND q.expiration_seconds = 0) THEN NULL
                    ELSE b.published_at + make_interval(secs => CASE WHEN b.expiration_seconds < 0
                                                                     THEN q.expiration_seconds
                                                                     ELSE b.expiration_seconds END)
               END AS expires_at,
               -- skipq.message_wire_size's measure, written out on the
               -- stored body's size: the call cost 1.9 % more a claim of
               -- 100 (callgrind).
               CASE WHEN b.body_binary THEN (b.size + 2) / 3 * 4 ELSE b.size END
                   + octet_length(b.metadata) + octet_length(b.tags::text) + octet_length(b.message_id)
                   + octet_length(b.client_id) + p_message_overhead AS wire
        FROM unnest(coalesce(p_body_ids, (SELECT k.body_ids[:p_max] FROM taken k))) WITH ORDINALITY AS u(id, k)
        CROSS JOIN LATERAL (
            SELECT d.message_id, c.client_id, c.metadata, c.body_binary, c.tags, d.published_at,
                   c.expiration_seconds, c.max_receive_count, c.dead_letter_queue,
                   octet_length(d.body)::bigint AS size
            FROM skipq.topic_bodies d JOIN skipq.topic_copy_parts c ON c.body_id = d.id
            WHERE d.id = u.id) b
    ), live AS (
        SELECT d.*, p_visibility_seconds IS NOT NULL
                    AND (row_number() OVER w = 1
                         OR sum(d.wire::float8) OVER w - d.wire < p_max_response_bytes) AS leased
        FROM drawn d
        WHERE d.expires_at IS NULL OR d.expires_at > (SELECT t.now FROM t)
        WINDOW w AS (ORDER BY d.k ROWS UNBOUNDED PRECEDING)
    ), made AS (
        INSERT INTO skipq.messages AS m (
            queue_id, sequence, message_id, client_id, metadata, body, body_binary, tags, sent_at, visible_at,
            expires_at, receive_count, first_received_at, max_receive_count, dead_letter_queue, lease_token, ready)
        SELECT q.id, l.sequence,
               CASE WHEN (SELECT x.sequence FROM skipq.messages x
                          WHERE x.message_id = l.message_id AND x.queue_id = q.id LIMIT 1) IS NULL
                    THEN l.message_id ELSE skipq.uuid_v7()::text END,
               l.client_id, l.metadata, '\x'::bytea, l.body_binary, l.tags,
               l.published_at,
               CASE WHEN l.leased THEN t.now + make_interval(secs => p_visibility_seconds) ELSE l.published_at END,
               l.expires_at,
               CASE WHEN l.leased THEN 1 ELSE 0 END,
               CASE WHEN l.leased THEN t.now END,
               CASE WHEN l.max_receive_count > 0 THEN l.max_receive_count
                    WHEN q.max_receive_count > 0 THEN q.max_receive_count
                    ELSE -l.max_receive_count END,
               coalesce(l.dead_letter_queue, q.dead_letter_queue),
               CASE WHEN NOT l.leased THEN NULL
                    WHEN p_max = 1 THEN t.secret
                    ELSE sha256(t.secret || int8send(l.sequence)) END,
               NOT l.leased
        FROM live l CROSS JOIN t
        ORDER BY l.k
        ON CONFLICT (message_id, queue_id) WHERE message_id IS NOT NULL DO NOTHING
        RETURNING m.*
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT c.queue_id, c.sequence FROM made c WHERE c.ready
    ), timed AS (
        INSERT INTO skipq.timer_sets (due_at, queue_id, sequences)
        SELECT t.now + make_interval(secs => p_visibility_seconds), q.id,
               ARRAY(SELECT c.sequence FROM made c WHERE NOT c.ready)
        FROM t
        WHERE EXISTS (SELECT 1 FROM made c WHERE NOT c.ready)
    )
    SELECT c.* FROM made c WHERE NOT c.ready ORDER BY c.sequence;
END $$;
-- +goose StatementEnd

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
    v_n    bigint;
    v_want integer;
    v_got  bigint;
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
    -- reads them unchanged and unlocked (after making the queue's pending
    -- topic copies ready, below); NULL, the previous release's call,
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
    -- A topic group's pending copies (skipq.topic_pending) are made when
    -- the walk of ready messages comes back short: by a claim, already
    -- leased to it, as many as it still may take (each row's copies
    -- measured against the response budget on their own, so an answer
    -- can exceed it); for autoAck and peeks, one row's as ready messages
    -- that the walk then takes (a peek makes them first: it takes
    -- nothing; autoAck when its walk found nothing). A queue without
    -- pending rows pays one probe of an empty index range.
    IF p_mode = 'delete' THEN
        RETURN QUERY SELECT d.* FROM skipq.message_claim_and_delete(p_tenant, p_queue, p_now, p_max_messages,
            p_max_response_bytes, p_message_overhead, p_key_id) d ORDER BY d.sequence;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        -- (Two IFs: a condition with a subquery is a statement, started
        -- whatever the other operand of an AND.)
        IF v_n = 0 THEN
            IF EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) THEN
                PERFORM skipq.topic_copies_make(q, NULL, least(p_max_messages, 32), v_now, NULL, NULL, 0);
                RETURN QUERY SELECT d.* FROM skipq.message_claim_and_delete(p_tenant, p_queue, p_now,
                    p_max_messages, p_max_response_bytes, p_message_overhead, p_key_id) d ORDER BY d.sequence;
            END IF;
        END IF;
        RETURN;
    END IF;
    IF p_mode = 'peek' THEN
        IF EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) THEN
            PERFORM skipq.topic_copies_make(q, NULL, least(p_max_messages, 32), v_now, NULL, NULL, 0);
        END IF;
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
    GET DIAGNOSTICS v_n = ROW_COUNT;
    -- Pending copies, a row at a time (a row holds up to 32), while each
    -- row gave all that was asked of it.
    IF v_n < p_max_messages THEN
        IF EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) THEN
            LOOP
                v_want := p_max_messages - v_n::integer;
                RETURN QUERY SELECT * FROM skipq.topic_copies_make(q, NULL, v_want, p_now,
                    coalesce(p_visibility_seconds, q.visibility_seconds), p_max_response_bytes, p_message_overhead);
                GET DIAGNOSTICS v_got = ROW_COUNT;
                v_n := v_n + v_got;
                EXIT WHEN v_got = 0 OR v_got < least(v_want, 32) OR v_n >= p_max_messages;
            END LOOP;
        END IF;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_queues(p_now timestamp with time zone, p_tenants text[], p_queues text[], p_max_messages integer[], p_visibility_seconds integer[], p_key_ids bigint[], p_max_response_bytes bigint[], p_message_overheads bigint[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    -- PL/pgSQL, not SQL: a SQL function with SET clauses is never inlined,
    -- and its query was planned on every call (about 1 M instructions);
    -- PL/pgSQL keeps one plan for the session, which the settings hold to
    -- the same probes.
    --
    -- Claim i takes up to p_max_messages[i] of queue p_queues[i] as
    -- skipq.message_claim does (at most one message of a FIFO group),
    -- under p_key_ids[i]; rows in claim order, each claim's in answer
    -- order. A topic copy comes with its stored body in place of its
    -- empty one and without the tag that named it (one primary-key probe
    -- of skipq.topic_bodies: the settings keep the planner from joining
    -- the whole table); a copy whose body is gone keeps both.
    RETURN QUERY
    SELECT k.claim::integer, m.queue_id, m.sequence, m.message_id, m.client_id, m.metadata,
           coalesce(b.body, m.body), m.body_binary,
           CASE WHEN b.body IS NULL THEN m.tags ELSE m.tags - 'skipq.body' END,
           m.sent_at, m.visible_at, m.delayed_to, m.expires_at, m.receive_count, m.first_received_at,
           m.max_receive_count, m.dead_letter_queue, m.re_routed_from, m.dead_lettered_at, m.lease_token, m.ready,
           m.group_id
    FROM unnest(p_tenants, p_queues, p_max_messages, p_visibility_seconds, p_key_ids, p_max_response_bytes,
                p_message_overheads)
             WITH ORDINALITY AS k(tenant, queue, max_messages, visibility_seconds, key_id, max_response_bytes,
                                  message_overhead, claim)
    CROSS JOIN LATERAL skipq.message_claim(k.tenant, k.queue, p_now, k.visibility_seconds, k.max_messages,
        k.max_response_bytes, k.message_overhead, k.key_id, 1, 'claim') WITH ORDINALITY AS m
    LEFT JOIN LATERAL (SELECT d.body FROM skipq.topic_bodies d
                       WHERE m.tags ? 'skipq.body' AND d.id = (m.tags ->> 'skipq.body')::bigint) b ON true
    ORDER BY k.claim, m.ordinality;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
DROP FUNCTION skipq.message_claim_queues(timestamptz, text[], text[], integer[], integer[], bigint[], bigint[], bigint[], text[]);
-- +goose StatementEnd
