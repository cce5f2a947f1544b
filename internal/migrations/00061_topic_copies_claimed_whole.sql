-- +goose Up
-- A topic group's claim, cheaper (docs/DESIGN.md, "Pending copies first"):
-- - skipq.topic_copies_make returns the copies it leases with their
--   stored body in place: the node read them after every claim of a group
--   with a statement of its own (TopicBodies), a second round trip; and it
--   takes from as many pending rows as the ids asked for fill, where the
--   claim called it once a row;
-- - skipq.message_claim has a mode 'claim_pending_first', which makes a
--   group's pending copies without the walk of ready rows when there are
--   none, and skipq.message_claim_queues a new overload with a mode a
--   queue (the previous release's calls it with none);
-- - skipq.topic_publish starts each group's pending rows at a row of
--   their own: a run that began mid-row made one short row more.
-- Changed bodies (same signatures): skipq.topic_copies_make,
-- skipq.message_claim, skipq.message_claim_queues (8 arguments),
-- skipq.topic_publish. New: skipq.message_claim_queues (9 arguments).

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
    -- One probe of messages_message_id_queue_key a copy. An insert of the
    -- id that another transaction has not committed yet is not seen by
    -- the probe: the copy's insert waits for it and, if it commits, fails
    -- with a unique violation (the statement, and the cut of the pending
    -- rows, roll back: nothing is lost, and a claim made again sees the
    -- id and draws a fresh one; package db's claims make it again once).
    -- Until 00061 an ON CONFLICT DO NOTHING dropped that copy instead, and
    -- the speculative insert cost 24,000 instructions a copy.
    --
    -- Rows stay in the order of their ids throughout, which is the order
    -- of their sequences (drawn in that order), so neither the running
    -- sum, the insert nor the answer sorts: each sort held the rows with
    -- their bodies once more (6 % of a claim of 100, callgrind).
    RETURN QUERY
    WITH t AS (
        SELECT coalesce(p_now, clock_timestamp()) AS now,
               uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS secret
    ), locked AS (
        SELECT p.id, p.body_ids FROM skipq.topic_pending p
        WHERE p_body_ids IS NULL AND p.queue_id = q.id
        ORDER BY p.id LIMIT (p_max + 31) / 32
        FOR UPDATE SKIP LOCKED
    ), taken AS (
        -- Each row's ids taken: as many as the rows before it left room
        -- for (before: their ids, in the order locked; any order would
        -- do, each row is left room for at least one).
        SELECT k.id, k.body_ids[:p_max - k.before] AS ids, k.before + cardinality(k.body_ids) > p_max AS cut
        FROM (SELECT k.id, k.body_ids,
                     (sum(cardinality(k.body_ids)) OVER w - cardinality(k.body_ids))::integer AS before
              FROM locked k WINDOW w AS (ROWS UNBOUNDED PRECEDING)) k
    ), cut AS (
        -- By key, not by the address the lock returned: a row that another
        -- claim cut and committed after this statement's snapshot was
        -- locked in its newer version, which an update by address, reading
        -- in the snapshot, would not find (the ids taken would stay pending
        -- and be made again); by key, the update follows the row to the
        -- version this statement locked, and cuts that.
        UPDATE skipq.topic_pending p
        SET body_ids = p.body_ids[(SELECT cardinality(k.ids) FROM taken k WHERE k.cut) + 1:]
        WHERE p.queue_id = q.id AND p.id = (SELECT k.id FROM taken k WHERE k.cut)
    ), whole AS (
        DELETE FROM skipq.topic_pending p
        WHERE p.queue_id = q.id AND p.id = ANY(ARRAY(SELECT k.id FROM taken k WHERE NOT k.cut))
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
                   d.body, octet_length(d.body)::bigint AS size
            FROM skipq.topic_bodies d JOIN skipq.topic_copy_parts c ON c.body_id = d.id
            WHERE d.id = u.id) b
    ), live AS (
        SELECT d.*, p_visibility_seconds IS NOT NULL
                    AND (row_number() OVER w = 1
                         OR sum(d.wire::float8) OVER w - d.wire < p_max_response_bytes) AS leased
        FROM drawn d
        WHERE d.expires_at IS NULL OR d.expires_at > (SELECT t.now FROM t)
        WINDOW w AS (ROWS UNBOUNDED PRECEDING)  -- drawn's order
    ), made AS (
        -- The copies, each as inserted below and with its body for the
        -- answer: the answer is read from here, not from the insert's
        -- RETURNING, which would need each body probed again.
        SELECT q.id AS queue_id, l.k, l.sequence,
               CASE WHEN (SELECT x.sequence FROM skipq.messages x
                          WHERE x.message_id = l.message_id AND x.queue_id = q.id LIMIT 1) IS NULL
                    THEN l.message_id ELSE skipq.uuid_v7()::text END AS message_id,
               l.client_id, l.metadata, l.body, l.body_binary, l.tags,
               l.published_at AS sent_at,
               CASE WHEN l.leased THEN t.now + make_interval(secs => p_visibility_seconds) ELSE l.published_at END
                   AS visible_at,
               l.expires_at,
               CASE WHEN l.leased THEN 1 ELSE 0 END AS receive_count,
               CASE WHEN l.leased THEN t.now END AS first_received_at,
               CASE WHEN l.max_receive_count > 0 THEN l.max_receive_count
                    WHEN q.max_receive_count > 0 THEN q.max_receive_count
                    ELSE -l.max_receive_count END AS max_receive_count,
               coalesce(l.dead_letter_queue, q.dead_letter_queue) AS dead_letter_queue,
               CASE WHEN NOT l.leased THEN NULL
                    WHEN p_max = 1 THEN t.secret
                    ELSE sha256(t.secret || int8send(l.sequence)) END AS lease_token,
               NOT l.leased AS ready
        FROM live l CROSS JOIN t
    ), inserted AS (
        INSERT INTO skipq.messages (
            queue_id, sequence, message_id, client_id, metadata, body, body_binary, tags, sent_at, visible_at,
            expires_at, receive_count, first_received_at, max_receive_count, dead_letter_queue, lease_token, ready)
        SELECT c.queue_id, c.sequence, c.message_id, c.client_id, c.metadata, '\x'::bytea, c.body_binary, c.tags,
               c.sent_at, c.visible_at, c.expires_at, c.receive_count, c.first_received_at, c.max_receive_count,
               c.dead_letter_queue, c.lease_token, c.ready
        FROM made c
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
    SELECT c.queue_id, c.sequence, c.message_id, c.client_id, c.metadata, c.body, c.body_binary,
           c.tags - 'skipq.body', c.sent_at, c.visible_at, NULL::timestamptz, c.expires_at, c.receive_count,
           c.first_received_at, c.max_receive_count, c.dead_letter_queue, NULL::text, NULL::timestamptz,
           c.lease_token, c.ready, NULL::text
    FROM made c
    WHERE NOT c.ready;
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_publish(p_tenant text, p_topic text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(pos integer, message_id text, outcome text, delivered_to integer, published_at timestamp with time zone, woken bigint[])
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    t         skipq.topics;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    v_keyed   boolean := true = ANY(p_keyed);
    v_hash    bytea[];
    v_outcome text[] := array_fill('sent'::text, ARRAY[n]);
    v_count   integer[] := array_fill(0, ARRAY[n]);
    v_at      timestamptz[] := array_fill(v_now, ARRAY[n]);
    v_woken   text[] := array_fill(''::text, ARRAY[n]);
    v_body_id bigint[];
    v_fresh   integer[];
    v_pos     integer[];
    v_first   integer;
    -- A position repeating an earlier one's key within the call: that
    -- position, whose result it answers with.
    v_dupof   integer[] := array_fill(NULL::integer, ARRAY[n]);
    b         skipq.topic_bodies;
    -- Per position: its tags as given (what filters read), and as each
    -- group's copy carries them.
    v_src     jsonb[];
    v_copy    jsonb[];
    -- The copies of the groups written together: queue ids and positions.
    v_fq      bigint[] := '{}';
    v_fx      integer[] := '{}';
    -- The copies left pending (skipq.topic_pending): queue ids and
    -- positions. A standard topic's unkeyed messages without a delay may
    -- be: their copies need nothing checked or timed at publish.
    v_pq      bigint[] := '{}';
    v_px      integer[] := '{}';
    v_lazy    boolean;
    s         record;
    r         record;
    i         integer;
BEGIN
    SELECT * INTO t FROM skipq.topics WHERE tenant = p_tenant AND name = p_topic;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- A FIFO topic's messages name a group, a standard topic's none (its
    -- groups' queues are of its kind), as a send to a queue.
    -- (An expression without a subquery: plpgsql evaluates it without
    -- starting an executor.)
    IF (CASE WHEN t.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE cardinality(array_remove(p_group_ids, NULL)) > 0 END) THEN
        RETURN QUERY
            SELECT x, p_message_ids[x], CASE WHEN t.fifo THEN 'group_required' ELSE 'group_refused' END,
                   0, NULL::timestamptz, NULL::bigint[]
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = t.fifo ORDER BY x;
        RETURN;
    END IF;
    -- skipq.topic_lock_key's key, written out: that function (SQL with its
    -- own search_path, so never inlined) would start an executor of its own.
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('topic/' || t.id::text, 0));

    IF v_keyed THEN
        -- Publishers of one key are serialized until commit (lock-number
        -- order: two batches cannot deadlock); a key's body row is the
        -- first publish's result for as long as it exists (its window, and
        -- while a copy is still in a group).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/' || p_message_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE p_keyed[x] ORDER BY 1) l;
        v_hash := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        -- Each key's body by a probe of topic_bodies_message_key, in a
        -- subquery a plan cannot turn into a join (a key given twice
        -- finds its body twice, and sets the same outcome).
        FOR b IN
            SELECT d.* FROM generate_subscripts(p_message_ids, 1) x
            CROSS JOIN LATERAL (SELECT * FROM skipq.topic_bodies d
                                WHERE d.topic_id = t.id AND d.message_id = p_message_ids[x] LIMIT 1) d
            WHERE p_keyed[x]
        LOOP
            i := array_position(p_message_ids, b.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = b.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_count[i] := b.delivered_to; v_at[i] := b.published_at;
        END LOOP;
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT p_keyed[i];
            v_first := array_position(p_message_ids, p_message_ids[i]);
            CONTINUE WHEN v_first = i;
            v_outcome[i] := CASE WHEN v_hash[i] = v_hash[v_first] THEN 'duplicate' ELSE 'conflict' END;
            v_dupof[i] := v_first;
        END LOOP;
        IF 'conflict' = ANY(v_outcome) THEN
            RETURN QUERY
                SELECT x, p_message_ids[x], 'conflict'::text, 0, NULL::timestamptz, NULL::bigint[]
                FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'conflict' ORDER BY x;
            RETURN;
        END IF;
    END IF;

    -- The fresh positions are those still 'sent'.
    IF t.fifo AND t.retain_seconds > 0 THEN
        -- A replay goes by body id: publishers of one groupId draw their
        -- ids in the order they reach the groups (lock-number order).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/group/' || p_group_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'sent' ORDER BY 1) l;
    END IF;
    -- In one statement (each a statement's start-up otherwise): the fresh
    -- positions, their body ids drawn in position order (the lateral
    -- subquery, volatile, is run once a position, in generate_subscripts'
    -- order), and each position's tags as given and as a copy carries them.
    SELECT coalesce(array_agg(x ORDER BY x) FILTER (WHERE f.id IS NOT NULL), '{}'),
           coalesce(array_agg(f.id ORDER BY x), '{}'),
           coalesce(array_agg(f.src ORDER BY x), '{}'),
           coalesce(array_agg(f.src || jsonb_build_object('skipq.topic', t.name, 'skipq.body', f.id::text)
                              ORDER BY x), '{}')
    INTO v_fresh, v_body_id, v_src, v_copy
    FROM generate_subscripts(p_message_ids, 1) x
    CROSS JOIN LATERAL (SELECT CASE WHEN v_outcome[x] = 'sent' THEN nextval('skipq.topic_body_sequence') END AS id,
                               p_tags[x]::jsonb AS src) f;
    -- Each group in queue-id order, its matching messages. A group whose
    -- queue traces or deduplicates by content gets them through a send of
    -- its own (skipq.message_insert: trace ids and events, keys); the
    -- copies of all other groups are written below in one statement. This
    -- statement's snapshot comes after the shared lock: no subscription
    -- change is in flight.
    -- (Array containment: an expression, no executor.)
    v_lazy := NOT t.fifo AND NOT v_keyed AND p_delay_seconds <@ ARRAY[-1, 0];
    FOR s IN
        SELECT ts.queue_id, ts.filter, q.name, q.content_based_dedup, q.fifo, q.delay_seconds,
               q.content_based_dedup OR EXISTS (SELECT 1 FROM skipq.queue_trace tr WHERE tr.queue_id = q.id)
                   AS alone
        FROM skipq.topic_subscriptions ts JOIN skipq.queues q ON q.id = ts.queue_id
        -- A subscription still replaying gets this publish from the
        -- retained messages (skipq.topic_replay), after the older ones.
        WHERE ts.topic_id = t.id
          AND NOT EXISTS (SELECT 1 FROM skipq.topic_replays rp WHERE rp.topic_id = ts.topic_id
                          AND rp.queue_id = ts.queue_id AND rp.created_at >= ts.created_at)
        ORDER BY ts.queue_id
    LOOP
        -- An unfiltered group's positions by assignment, not by a query.
        IF s.filter IS NULL THEN
            v_pos := v_fresh;
        ELSE
            v_pos := ARRAY(SELECT x FROM unnest(v_fresh) x WHERE skipq.topic_matches(s.filter, v_src[x]) ORDER BY x);
        END IF;
        CONTINUE WHEN cardinality(v_pos) = 0;
        IF NOT s.alone AND v_lazy AND NOT s.fifo AND (s.delay_seconds = 0 OR NOT -1 = ANY(p_delay_seconds)) THEN
            -- Padded with NULLs to a multiple of 32, so that each group's
            -- positions start a row of their own below.
            v_pq := v_pq || array_fill(s.queue_id, ARRAY[cardinality(v_pos)])
                         || array_fill(NULL::bigint, ARRAY[(32 - cardinality(v_pos) % 32) % 32]);
            v_px := v_px || v_pos || array_fill(NULL::integer, ARRAY[(32 - cardinality(v_pos) % 32) % 32]);
            CONTINUE;
        END IF;
        IF NOT s.alone THEN
            v_fq := v_fq || array_fill(s.queue_id, ARRAY[cardinality(v_pos)]);
            v_fx := v_fx || v_pos;
            CONTINUE;
        END IF;
        FOR r IN
            SELECT * FROM skipq.message_insert(
                p_tenant, s.name, v_now, p_server_max_receive_count,
                ARRAY(SELECT p_message_ids[x] FROM unnest(v_pos) x),
                -- A queue that deduplicates by content would take every
                -- empty body for the same: its copies are keyed by id.
                array_fill(s.content_based_dedup, ARRAY[cardinality(v_pos)]),
                ARRAY(SELECT p_client_ids[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_metadatas[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_body_binaries[x] FROM unnest(v_pos) x),
                ARRAY(SELECT v_copy[x]::text FROM unnest(v_pos) x),
                ARRAY(SELECT p_delay_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_expiration_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_max_receive_counts[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queues[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queue_given[x] FROM unnest(v_pos) x),
                array_fill(1, ARRAY[cardinality(v_pos)]), array_fill(0, ARRAY[cardinality(v_pos)]), '\x'::bytea,
                CASE WHEN t.fifo THEN ARRAY(SELECT p_group_ids[x] FROM unnest(v_pos) x) END,
                NULL,
                CASE WHEN p_key_ids IS NOT NULL THEN ARRAY(SELECT p_key_ids[x] FROM unnest(v_pos) x) END) m
        LOOP
            IF r.queue_id <> s.queue_id THEN
                -- The subscribed queue was deleted and one of its name
                -- created after this statement read the subscriptions:
                -- that queue did not subscribe.
                RAISE EXCEPTION 'skipq: queue % was re-created during a publish', s.name
                    USING ERRCODE = '40001';
            END IF;
            CONTINUE WHEN r.outcome NOT IN ('sent', 'duplicate');
            i := v_pos[r.pos];
            v_count[i] := v_count[i] + 1;
            IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
                v_woken[i] := v_woken[i] || ',' || s.queue_id::text;
            END IF;
        END LOOP;
    END LOOP;

    IF cardinality(v_fx) > 0 THEN
        -- The other groups' copies, one insert for all: a send's insert
        -- (skipq.message_insert's, with each queue's defaults) of empty
        -- bodies, its sequences drawn group by group in position order
        -- after the FIFO groups' locks (skipq.group_enter, in lock-number
        -- order). A queue deleted since the subscriptions were read gets
        -- nothing (the join), as a send to a missing queue.
        IF t.fifo THEN
            PERFORM skipq.group_enter(v_fq, ARRAY(SELECT p_group_ids[f.x] FROM unnest(v_fx) WITH ORDINALITY AS f(x, k)
                                                 ORDER BY f.k));
        END IF;
        WITH inserted AS (
            INSERT INTO skipq.messages AS msg (
                queue_id, message_id, client_id, metadata, body, body_binary, tags,
                sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready, group_id)
            SELECT q.id, p_message_ids[f.x], p_client_ids[f.x], p_metadatas[f.x], '\x'::bytea,
                   p_body_binaries[f.x], v_copy[f.x],
                   v_now,
                   v_now + make_interval(secs => p.delay_seconds),
                   CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
                   CASE WHEN p.expiration_seconds > 0
                        THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
                   p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0, p_group_ids[f.x]
            -- Each queue looked up once, its copies' positions beside it.
            FROM skipq.queues q
            CROSS JOIN LATERAL (SELECT u.q, u.x FROM unnest(v_fq, v_fx) AS u(q, x) WHERE u.q = q.id) f
            CROSS JOIN LATERAL (SELECT
                CASE WHEN p_delay_seconds[f.x] < 0 THEN q.delay_seconds ELSE p_delay_seconds[f.x] END AS delay_seconds,
                CASE WHEN p_expiration_seconds[f.x] < 0 THEN q.expiration_seconds ELSE p_expiration_seconds[f.x] END
                    AS expiration_seconds,
                CASE WHEN p_max_receive_counts[f.x] > 0 THEN p_max_receive_counts[f.x]
                     WHEN q.max_receive_count > 0 THEN q.max_receive_count
                     ELSE p_server_max_receive_count END AS max_receive_count,
                CASE WHEN p_dead_letter_queue_given[f.x] THEN p_dead_letter_queues[f.x] ELSE q.dead_letter_queue END
                    AS dead_letter_queue
            ) p
            WHERE q.id = ANY(v_fq)
            ORDER BY f.q, f.x
            RETURNING msg.queue_id, msg.message_id, msg.sequence, msg.visible_at, msg.ready
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT w.queue_id, w.sequence FROM inserted w WHERE w.ready
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT w.visible_at, w.queue_id, w.sequence FROM inserted w WHERE NOT w.ready
        ), per_message AS (
            -- A fresh position's message id is its own (no two share one).
            SELECT w.message_id, count(*)::integer AS groups,
                   coalesce(string_agg(',' || w.queue_id::text, '' ORDER BY w.queue_id) FILTER (WHERE w.ready), '')
                       AS woken
            FROM inserted w GROUP BY w.message_id
        )
        SELECT array_agg(v_count[x] + coalesce(c.groups, 0) ORDER BY x),
               array_agg(v_woken[x] || coalesce(c.woken, '') ORDER BY x)
        INTO v_count, v_woken
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN per_message c ON v_outcome[x] = 'sent' AND c.message_id = p_message_ids[x];
    END IF;

    IF cardinality(v_px) > 0 THEN
        -- The pending copies: a row a group and 32 positions (a claim
        -- locks the rows it takes from; smaller rows hide less of a
        -- publish from the group's other consumers), each position's body
        -- id. A queue deleted since the subscriptions were read gets
        -- nothing, as above.
        WITH pending AS (
            INSERT INTO skipq.topic_pending (queue_id, topic_id, body_ids, first_body_id, published_at)
            SELECT f.q, t.id, array_agg(v_body_id[f.x] ORDER BY f.k), min(v_body_id[f.x]), v_now
            FROM unnest(v_pq, v_px) WITH ORDINALITY AS f(q, x, k)
            WHERE f.q IS NOT NULL AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = f.q)
            GROUP BY f.q, (f.k - 1) / 32
            ORDER BY f.q, (f.k - 1) / 32
            RETURNING queue_id, body_ids
        ), per_body AS (
            SELECT u.body_id, count(*)::integer AS groups,
                   string_agg(',' || p.queue_id::text, '' ORDER BY p.queue_id) AS woken
            FROM pending p CROSS JOIN LATERAL unnest(p.body_ids) AS u(body_id) GROUP BY u.body_id
        )
        SELECT array_agg(v_count[x] + coalesce(c.groups, 0) ORDER BY x),
               array_agg(v_woken[x] || coalesce(c.woken, '') ORDER BY x)
        INTO v_count, v_woken
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN per_body c ON c.body_id = v_body_id[x];
        -- What those copies are made of besides the body, once a message
        -- (a maximum receive count not given as the server's, negated:
        -- the queue's comes first). Every fresh position: all are unkeyed.
        INSERT INTO skipq.topic_copy_parts (body_id, client_id, metadata, body_binary, tags, expiration_seconds,
                                            max_receive_count, dead_letter_queue)
        SELECT v_body_id[x], p_client_ids[x], p_metadatas[x], p_body_binaries[x], v_copy[x], p_expiration_seconds[x],
               CASE WHEN p_max_receive_counts[x] > 0 THEN p_max_receive_counts[x] ELSE -p_server_max_receive_count END,
               CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] END
        FROM unnest(v_fresh) x;
    END IF;

    IF v_keyed THEN
        FOR i IN 1 .. n LOOP
            IF v_dupof[i] IS NOT NULL THEN
                v_count[i] := v_count[v_dupof[i]]; v_at[i] := v_at[v_dupof[i]];
            END IF;
        END LOOP;
    END IF;

    -- The bodies, once each: of the messages some group got, of keyed
    -- ones (their key answers a second publish even when nothing matched),
    -- and of every one a topic retains.
    INSERT INTO skipq.topic_bodies (id, topic_id, message_id, content_hash, body, published_at, window_ends,
                                    delivered_to)
    SELECT v_body_id[x], t.id, p_message_ids[x], CASE WHEN p_keyed[x] THEN v_hash[x] END,
           substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]), v_now,
           v_now + make_interval(secs => t.dedup_window_seconds), v_count[x]
    FROM unnest(v_fresh) x
    WHERE v_count[x] > 0 OR p_keyed[x] OR t.retain_seconds > 0;
    IF t.retain_seconds > 0 THEN
        -- What a replay sends again: the message as published.
        INSERT INTO skipq.topic_retained (topic_id, id, message_id, published_at, client_id, metadata,
                                          body_binary, tags, group_id, expiration_seconds, max_receive_count,
                                          dead_letter_queue)
        SELECT t.id, v_body_id[x], p_message_ids[x], v_now, p_client_ids[x], p_metadatas[x], p_body_binaries[x],
               v_src[x], p_group_ids[x], p_expiration_seconds[x], p_max_receive_counts[x],
               CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] END
        FROM unnest(v_fresh) x ORDER BY x;
    END IF;
    IF cardinality(v_fresh) > 0 THEN
        INSERT INTO skipq.topic_counts (topic_id, published, delivered, unrouted)
        SELECT t.id, count(*), sum(v_count[x]), count(*) FILTER (WHERE v_count[x] = 0)
        FROM unnest(v_fresh) x;
    END IF;

    RETURN QUERY
    SELECT x, p_message_ids[x], v_outcome[x], v_count[x], v_at[x],
           CASE WHEN v_woken[x] = '' THEN '{}'::bigint[] ELSE string_to_array(substr(v_woken[x], 2), ',')::bigint[] END
    FROM generate_subscripts(p_message_ids, 1) x ORDER BY x;
END $$;
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_publish(p_tenant text, p_topic text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(pos integer, message_id text, outcome text, delivered_to integer, published_at timestamp with time zone, woken bigint[])
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    t         skipq.topics;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    v_keyed   boolean := true = ANY(p_keyed);
    v_hash    bytea[];
    v_outcome text[] := array_fill('sent'::text, ARRAY[n]);
    v_count   integer[] := array_fill(0, ARRAY[n]);
    v_at      timestamptz[] := array_fill(v_now, ARRAY[n]);
    v_woken   text[] := array_fill(''::text, ARRAY[n]);
    v_body_id bigint[];
    v_fresh   integer[];
    v_pos     integer[];
    v_first   integer;
    -- A position repeating an earlier one's key within the call: that
    -- position, whose result it answers with.
    v_dupof   integer[] := array_fill(NULL::integer, ARRAY[n]);
    b         skipq.topic_bodies;
    -- Per position: its tags as given (what filters read), and as each
    -- group's copy carries them.
    v_src     jsonb[];
    v_copy    jsonb[];
    -- The copies of the groups written together: queue ids and positions.
    v_fq      bigint[] := '{}';
    v_fx      integer[] := '{}';
    -- The copies left pending (skipq.topic_pending): queue ids and
    -- positions. A standard topic's unkeyed messages without a delay may
    -- be: their copies need nothing checked or timed at publish.
    v_pq      bigint[] := '{}';
    v_px      integer[] := '{}';
    v_lazy    boolean;
    s         record;
    r         record;
    i         integer;
BEGIN
    SELECT * INTO t FROM skipq.topics WHERE tenant = p_tenant AND name = p_topic;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- A FIFO topic's messages name a group, a standard topic's none (its
    -- groups' queues are of its kind), as a send to a queue.
    -- (An expression without a subquery: plpgsql evaluates it without
    -- starting an executor.)
    IF (CASE WHEN t.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE cardinality(array_remove(p_group_ids, NULL)) > 0 END) THEN
        RETURN QUERY
            SELECT x, p_message_ids[x], CASE WHEN t.fifo THEN 'group_required' ELSE 'group_refused' END,
                   0, NULL::timestamptz, NULL::bigint[]
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = t.fifo ORDER BY x;
        RETURN;
    END IF;
    -- skipq.topic_lock_key's key, written out: that function (SQL with its
    -- own search_path, so never inlined) would start an executor of its own.
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('topic/' || t.id::text, 0));

    IF v_keyed THEN
        -- Publishers of one key are serialized until commit (lock-number
        -- order: two batches cannot deadlock); a key's body row is the
        -- first publish's result for as long as it exists (its window, and
        -- while a copy is still in a group).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/' || p_message_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE p_keyed[x] ORDER BY 1) l;
        v_hash := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        -- Each key's body by a probe of topic_bodies_message_key, in a
        -- subquery a plan cannot turn into a join (a key given twice
        -- finds its body twice, and sets the same outcome).
        FOR b IN
            SELECT d.* FROM generate_subscripts(p_message_ids, 1) x
            CROSS JOIN LATERAL (SELECT * FROM skipq.topic_bodies d
                                WHERE d.topic_id = t.id AND d.message_id = p_message_ids[x] LIMIT 1) d
            WHERE p_keyed[x]
        LOOP
            i := array_position(p_message_ids, b.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = b.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_count[i] := b.delivered_to; v_at[i] := b.published_at;
        END LOOP;
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT p_keyed[i];
            v_first := array_position(p_message_ids, p_message_ids[i]);
            CONTINUE WHEN v_first = i;
            v_outcome[i] := CASE WHEN v_hash[i] = v_hash[v_first] THEN 'duplicate' ELSE 'conflict' END;
            v_dupof[i] := v_first;
        END LOOP;
        IF 'conflict' = ANY(v_outcome) THEN
            RETURN QUERY
                SELECT x, p_message_ids[x], 'conflict'::text, 0, NULL::timestamptz, NULL::bigint[]
                FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'conflict' ORDER BY x;
            RETURN;
        END IF;
    END IF;

    -- The fresh positions are those still 'sent'.
    IF t.fifo AND t.retain_seconds > 0 THEN
        -- A replay goes by body id: publishers of one groupId draw their
        -- ids in the order they reach the groups (lock-number order).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/group/' || p_group_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'sent' ORDER BY 1) l;
    END IF;
    -- In one statement (each a statement's start-up otherwise): the fresh
    -- positions, their body ids drawn in position order (the lateral
    -- subquery, volatile, is run once a position, in generate_subscripts'
    -- order), and each position's tags as given and as a copy carries them.
    SELECT coalesce(array_agg(x ORDER BY x) FILTER (WHERE f.id IS NOT NULL), '{}'),
           coalesce(array_agg(f.id ORDER BY x), '{}'),
           coalesce(array_agg(f.src ORDER BY x), '{}'),
           coalesce(array_agg(f.src || jsonb_build_object('skipq.topic', t.name, 'skipq.body', f.id::text)
                              ORDER BY x), '{}')
    INTO v_fresh, v_body_id, v_src, v_copy
    FROM generate_subscripts(p_message_ids, 1) x
    CROSS JOIN LATERAL (SELECT CASE WHEN v_outcome[x] = 'sent' THEN nextval('skipq.topic_body_sequence') END AS id,
                               p_tags[x]::jsonb AS src) f;
    -- Each group in queue-id order, its matching messages. A group whose
    -- queue traces or deduplicates by content gets them through a send of
    -- its own (skipq.message_insert: trace ids and events, keys); the
    -- copies of all other groups are written below in one statement. This
    -- statement's snapshot comes after the shared lock: no subscription
    -- change is in flight.
    -- (Array containment: an expression, no executor.)
    v_lazy := NOT t.fifo AND NOT v_keyed AND p_delay_seconds <@ ARRAY[-1, 0];
    FOR s IN
        SELECT ts.queue_id, ts.filter, q.name, q.content_based_dedup, q.fifo, q.delay_seconds,
               q.content_based_dedup OR EXISTS (SELECT 1 FROM skipq.queue_trace tr WHERE tr.queue_id = q.id)
                   AS alone
        FROM skipq.topic_subscriptions ts JOIN skipq.queues q ON q.id = ts.queue_id
        -- A subscription still replaying gets this publish from the
        -- retained messages (skipq.topic_replay), after the older ones.
        WHERE ts.topic_id = t.id
          AND NOT EXISTS (SELECT 1 FROM skipq.topic_replays rp WHERE rp.topic_id = ts.topic_id
                          AND rp.queue_id = ts.queue_id AND rp.created_at >= ts.created_at)
        ORDER BY ts.queue_id
    LOOP
        -- An unfiltered group's positions by assignment, not by a query.
        IF s.filter IS NULL THEN
            v_pos := v_fresh;
        ELSE
            v_pos := ARRAY(SELECT x FROM unnest(v_fresh) x WHERE skipq.topic_matches(s.filter, v_src[x]) ORDER BY x);
        END IF;
        CONTINUE WHEN cardinality(v_pos) = 0;
        IF NOT s.alone AND v_lazy AND NOT s.fifo AND (s.delay_seconds = 0 OR NOT -1 = ANY(p_delay_seconds)) THEN
            v_pq := v_pq || array_fill(s.queue_id, ARRAY[cardinality(v_pos)]);
            v_px := v_px || v_pos;
            CONTINUE;
        END IF;
        IF NOT s.alone THEN
            v_fq := v_fq || array_fill(s.queue_id, ARRAY[cardinality(v_pos)]);
            v_fx := v_fx || v_pos;
            CONTINUE;
        END IF;
        FOR r IN
            SELECT * FROM skipq.message_insert(
                p_tenant, s.name, v_now, p_server_max_receive_count,
                ARRAY(SELECT p_message_ids[x] FROM unnest(v_pos) x),
                -- A queue that deduplicates by content would take every
                -- empty body for the same: its copies are keyed by id.
                array_fill(s.content_based_dedup, ARRAY[cardinality(v_pos)]),
                ARRAY(SELECT p_client_ids[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_metadatas[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_body_binaries[x] FROM unnest(v_pos) x),
                ARRAY(SELECT v_copy[x]::text FROM unnest(v_pos) x),
                ARRAY(SELECT p_delay_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_expiration_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_max_receive_counts[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queues[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queue_given[x] FROM unnest(v_pos) x),
                array_fill(1, ARRAY[cardinality(v_pos)]), array_fill(0, ARRAY[cardinality(v_pos)]), '\x'::bytea,
                CASE WHEN t.fifo THEN ARRAY(SELECT p_group_ids[x] FROM unnest(v_pos) x) END,
                NULL,
                CASE WHEN p_key_ids IS NOT NULL THEN ARRAY(SELECT p_key_ids[x] FROM unnest(v_pos) x) END) m
        LOOP
            IF r.queue_id <> s.queue_id THEN
                -- The subscribed queue was deleted and one of its name
                -- created after this statement read the subscriptions:
                -- that queue did not subscribe.
                RAISE EXCEPTION 'skipq: queue % was re-created during a publish', s.name
                    USING ERRCODE = '40001';
            END IF;
            CONTINUE WHEN r.outcome NOT IN ('sent', 'duplicate');
            i := v_pos[r.pos];
            v_count[i] := v_count[i] + 1;
            IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
                v_woken[i] := v_woken[i] || ',' || s.queue_id::text;
            END IF;
        END LOOP;
    END LOOP;

    IF cardinality(v_fx) > 0 THEN
        -- The other groups' copies, one insert for all: a send's insert
        -- (skipq.message_insert's, with each queue's defaults) of empty
        -- bodies, its sequences drawn group by group in position order
        -- after the FIFO groups' locks (skipq.group_enter, in lock-number
        -- order). A queue deleted since the subscriptions were read gets
        -- nothing (the join), as a send to a missing queue.
        IF t.fifo THEN
            PERFORM skipq.group_enter(v_fq, ARRAY(SELECT p_group_ids[f.x] FROM unnest(v_fx) WITH ORDINALITY AS f(x, k)
                                                 ORDER BY f.k));
        END IF;
        WITH inserted AS (
            INSERT INTO skipq.messages AS msg (
                queue_id, message_id, client_id, metadata, body, body_binary, tags,
                sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready, group_id)
            SELECT q.id, p_message_ids[f.x], p_client_ids[f.x], p_metadatas[f.x], '\x'::bytea,
                   p_body_binaries[f.x], v_copy[f.x],
                   v_now,
                   v_now + make_interval(secs => p.delay_seconds),
                   CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
                   CASE WHEN p.expiration_seconds > 0
                        THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
                   p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0, p_group_ids[f.x]
            -- Each queue looked up once, its copies' positions beside it.
            FROM skipq.queues q
            CROSS JOIN LATERAL (SELECT u.q, u.x FROM unnest(v_fq, v_fx) AS u(q, x) WHERE u.q = q.id) f
            CROSS JOIN LATERAL (SELECT
                CASE WHEN p_delay_seconds[f.x] < 0 THEN q.delay_seconds ELSE p_delay_seconds[f.x] END AS delay_seconds,
                CASE WHEN p_expiration_seconds[f.x] < 0 THEN q.expiration_seconds ELSE p_expiration_seconds[f.x] END
                    AS expiration_seconds,
                CASE WHEN p_max_receive_counts[f.x] > 0 THEN p_max_receive_counts[f.x]
                     WHEN q.max_receive_count > 0 THEN q.max_receive_count
                     ELSE p_server_max_receive_count END AS max_receive_count,
                CASE WHEN p_dead_letter_queue_given[f.x] THEN p_dead_letter_queues[f.x] ELSE q.dead_letter_queue END
                    AS dead_letter_queue
            ) p
            WHERE q.id = ANY(v_fq)
            ORDER BY f.q, f.x
            RETURNING msg.queue_id, msg.message_id, msg.sequence, msg.visible_at, msg.ready
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT w.queue_id, w.sequence FROM inserted w WHERE w.ready
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT w.visible_at, w.queue_id, w.sequence FROM inserted w WHERE NOT w.ready
        ), per_message AS (
            -- A fresh position's message id is its own (no two share one).
            SELECT w.message_id, count(*)::integer AS groups,
                   coalesce(string_agg(',' || w.queue_id::text, '' ORDER BY w.queue_id) FILTER (WHERE w.ready), '')
                       AS woken
            FROM inserted w GROUP BY w.message_id
        )
        SELECT array_agg(v_count[x] + coalesce(c.groups, 0) ORDER BY x),
               array_agg(v_woken[x] || coalesce(c.woken, '') ORDER BY x)
        INTO v_count, v_woken
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN per_message c ON v_outcome[x] = 'sent' AND c.message_id = p_message_ids[x];
    END IF;

    IF cardinality(v_px) > 0 THEN
        -- The pending copies: a row a group and 32 positions (a claim
        -- locks the rows it takes from; smaller rows hide less of a
        -- publish from the group's other consumers), each position's body
        -- id. A queue deleted since the subscriptions were read gets
        -- nothing, as above.
        WITH pending AS (
            INSERT INTO skipq.topic_pending (queue_id, topic_id, body_ids, first_body_id, published_at)
            SELECT f.q, t.id, array_agg(v_body_id[f.x] ORDER BY f.k), min(v_body_id[f.x]), v_now
            FROM unnest(v_pq, v_px) WITH ORDINALITY AS f(q, x, k)
            WHERE EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = f.q)
            GROUP BY f.q, (f.k - 1) / 32
            ORDER BY f.q, (f.k - 1) / 32
            RETURNING queue_id, body_ids
        ), per_body AS (
            SELECT u.body_id, count(*)::integer AS groups,
                   string_agg(',' || p.queue_id::text, '' ORDER BY p.queue_id) AS woken
            FROM pending p CROSS JOIN LATERAL unnest(p.body_ids) AS u(body_id) GROUP BY u.body_id
        )
        SELECT array_agg(v_count[x] + coalesce(c.groups, 0) ORDER BY x),
               array_agg(v_woken[x] || coalesce(c.woken, '') ORDER BY x)
        INTO v_count, v_woken
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN per_body c ON c.body_id = v_body_id[x];
        -- What those copies are made of besides the body, once a message
        -- (a maximum receive count not given as the server's, negated:
        -- the queue's comes first). Every fresh position: all are unkeyed.
        INSERT INTO skipq.topic_copy_parts (body_id, client_id, metadata, body_binary, tags, expiration_seconds,
                                            max_receive_count, dead_letter_queue)
        SELECT v_body_id[x], p_client_ids[x], p_metadatas[x], p_body_binaries[x], v_copy[x], p_expiration_seconds[x],
               CASE WHEN p_max_receive_counts[x] > 0 THEN p_max_receive_counts[x] ELSE -p_server_max_receive_count END,
               CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] END
        FROM unnest(v_fresh) x;
    END IF;

    IF v_keyed THEN
        FOR i IN 1 .. n LOOP
            IF v_dupof[i] IS NOT NULL THEN
                v_count[i] := v_count[v_dupof[i]]; v_at[i] := v_at[v_dupof[i]];
            END IF;
        END LOOP;
    END IF;

    -- The bodies, once each: of the messages some group got, of keyed
    -- ones (their key answers a second publish even when nothing matched),
    -- and of every one a topic retains.
    INSERT INTO skipq.topic_bodies (id, topic_id, message_id, content_hash, body, published_at, window_ends,
                                    delivered_to)
    SELECT v_body_id[x], t.id, p_message_ids[x], CASE WHEN p_keyed[x] THEN v_hash[x] END,
           substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]), v_now,
           v_now + make_interval(secs => t.dedup_window_seconds), v_count[x]
    FROM unnest(v_fresh) x
    WHERE v_count[x] > 0 OR p_keyed[x] OR t.retain_seconds > 0;
    IF t.retain_seconds > 0 THEN
        -- What a replay sends again: the message as published.
        INSERT INTO skipq.topic_retained (topic_id, id, message_id, published_at, client_id, metadata,
                                          body_binary, tags, group_id, expiration_seconds, max_receive_count,
                                          dead_letter_queue)
        SELECT t.id, v_body_id[x], p_message_ids[x], v_now, p_client_ids[x], p_metadatas[x], p_body_binaries[x],
               v_src[x], p_group_ids[x], p_expiration_seconds[x], p_max_receive_counts[x],
               CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] END
        FROM unnest(v_fresh) x ORDER BY x;
    END IF;
    IF cardinality(v_fresh) > 0 THEN
        INSERT INTO skipq.topic_counts (topic_id, published, delivered, unrouted)
        SELECT t.id, count(*), sum(v_count[x]), count(*) FILTER (WHERE v_count[x] = 0)
        FROM unnest(v_fresh) x;
    END IF;

    RETURN QUERY
    SELECT x, p_message_ids[x], v_outcome[x], v_count[x], v_at[x],
           CASE WHEN v_woken[x] = '' THEN '{}'::bigint[] ELSE string_to_array(substr(v_woken[x], 2), ',')::bigint[] END
    FROM generate_subscripts(p_message_ids, 1) x ORDER BY x;
END $$;
-- +goose StatementEnd
