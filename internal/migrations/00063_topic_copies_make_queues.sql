-- +goose Up
-- A wake-up of many topic groups, cheaper (docs/DESIGN.md, "One make for
-- a shared claim (00063)"): the node's claim of several queues in one
-- statement (skipq.message_claim_queues) made each group's pending copies
-- with a statement of its own, one skipq.topic_copies_make a queue, and
-- that statement's start-up (about 456,000 instructions, callgrind) was
-- most of a group's claim of one: ten groups woken by one publish paid it
-- ten times over. Now the pending-first claims of fewer than 32 messages
-- are made together, by skipq.topic_copies_make_queues (new), in one
-- statement; the other claims run as before.
-- New: skipq.topic_copies_make_queues. Changed body (same signature):
-- skipq.message_claim_queues (9 arguments).

-- +goose StatementBegin
CREATE FUNCTION skipq.topic_copies_make_queues(p_claims integer[], p_queue_ids bigint[], p_max integer[], p_now timestamp with time zone, p_visibility_seconds integer[], p_max_response_bytes bigint[], p_message_overheads bigint[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- Called by skipq.message_claim_queues only, whose plan settings (no
    -- joins or scans but the ones meant; generic plans) apply here too.
    --
    -- Claim p_claims[i] takes the oldest pending row of queue
    -- p_queue_ids[i] that no other transaction holds (FOR UPDATE SKIP
    -- LOCKED) whole, as skipq.topic_copies_make does for a claim of fewer
    -- than 32: it leases up to p_max[i] (fewer than 32) of the row's
    -- copies for p_visibility_seconds[i], within p_max_response_bytes[i]
    -- (each copy measured with p_message_overheads[i]; the first always
    -- fits), and makes the rest ready messages. The queues must differ:
    -- the claims share one snapshot and one transaction's locks, and two
    -- claims of one queue would lock, and take, the same row. Each claim
    -- is made as skipq.topic_copies_make makes it (which says why each
    -- step is as it is): its own secret, one timer set; a copy already
    -- expired is not made, a copy whose message id its queue holds gets a
    -- fresh one; rows in claim order, each claim's in the order of their
    -- ids (their sequences, drawn in that order), the leased ones returned
    -- with their stored body in place and without the skipq.body tag. A
    -- claim whose queue has no pending row free returns nothing.
    --
    -- One claim takes one row, so the rows taken are each claim's, and
    -- each row's running count and size (a window over the row's ids, in
    -- a lateral of its own) are the claim's: no window partitions by
    -- claim, which would sort the copies with their bodies.
    RETURN QUERY
    WITH t AS (
        SELECT coalesce(p_now, clock_timestamp()) AS now
    ), k AS (
        -- Materialized (volatile): each claim's secret drawn once.
        SELECT k.claim, k.max, k.visibility_seconds, k.max_response_bytes, k.message_overhead,
               q.id AS queue_id, q.expiration_seconds, q.max_receive_count, q.dead_letter_queue,
               uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS secret
        FROM unnest(p_claims, p_queue_ids, p_max, p_visibility_seconds, p_max_response_bytes, p_message_overheads)
                 AS k(claim, queue_id, max, visibility_seconds, max_response_bytes, message_overhead)
        JOIN skipq.queues q ON q.id = k.queue_id
    ), taken AS (
        SELECT k.*, p.id, p.body_ids
        FROM k CROSS JOIN LATERAL (
            SELECT p.id, p.body_ids FROM skipq.topic_pending p
            WHERE p.queue_id = k.queue_id
            ORDER BY p.id LIMIT 1
            FOR UPDATE SKIP LOCKED) p
    ), whole AS (
        -- By key, as skipq.topic_copies_make deletes (it says why).
        DELETE FROM skipq.topic_pending p
        USING taken x
        WHERE p.queue_id = x.queue_id AND p.id = x.id
    ), drawn AS (
        SELECT x.claim, x.queue_id, x.max, x.visibility_seconds, x.max_response_bytes, x.max_receive_count AS queue_max_receive_count,
               x.dead_letter_queue AS queue_dead_letter_queue, x.secret, d.*,
               nextval('skipq.message_sequence') AS sequence
        FROM taken x CROSS JOIN LATERAL (
            SELECT d.*, row_number() OVER w AS n, sum(d.wire::float8) OVER w - d.wire AS before
            FROM (
                SELECT b.*,
                       -- skipq.message_wire_size's measure on the stored
                       -- body's size, as skipq.topic_copies_make writes it.
                       CASE WHEN b.body_binary THEN (b.size + 2) / 3 * 4 ELSE b.size END
                           + octet_length(b.metadata) + octet_length(b.tags::text) + octet_length(b.message_id)
                           + octet_length(b.client_id) + x.message_overhead AS wire
                FROM (
                    SELECT b.*,
                           CASE WHEN b.expiration_seconds = 0
                                     OR (b.expiration_seconds < 0 AND x.expiration_seconds = 0) THEN NULL
                                ELSE b.published_at + make_interval(secs => CASE WHEN b.expiration_seconds < 0
                                                                                 THEN x.expiration_seconds
                                                                                 ELSE b.expiration_seconds END)
                           END AS expires_at
                    FROM unnest(x.body_ids) AS u(id)
                    CROSS JOIN LATERAL (
                        SELECT d.message_id, c.client_id, c.metadata, c.body_binary, c.tags, d.published_at,
                               c.expiration_seconds, c.max_receive_count, c.dead_letter_queue,
                               d.body, octet_length(d.body)::bigint AS size
                        FROM skipq.topic_bodies d JOIN skipq.topic_copy_parts c ON c.body_id = d.id
                        WHERE d.id = u.id) b) b
                WHERE b.expires_at IS NULL OR b.expires_at > (SELECT t.now FROM t)) d
            WINDOW w AS (ROWS UNBOUNDED PRECEDING)) d  -- the row's order
    ), made AS (
        SELECT l.claim, l.queue_id, l.sequence,
               CASE WHEN (SELECT x.sequence FROM skipq.messages x
                          WHERE x.message_id = l.message_id AND x.queue_id = l.queue_id LIMIT 1) IS NULL
                    THEN l.message_id ELSE skipq.uuid_v7()::text END AS message_id,
               l.client_id, l.metadata, l.body, l.body_binary, l.tags,
               l.published_at AS sent_at,
               CASE WHEN l.leased THEN t.now + make_interval(secs => l.visibility_seconds) ELSE l.published_at END
                   AS visible_at,
               l.expires_at,
               CASE WHEN l.leased THEN 1 ELSE 0 END AS receive_count,
               CASE WHEN l.leased THEN t.now END AS first_received_at,
               CASE WHEN l.max_receive_count > 0 THEN l.max_receive_count
                    WHEN l.queue_max_receive_count > 0 THEN l.queue_max_receive_count
                    ELSE -l.max_receive_count END AS max_receive_count,
               coalesce(l.dead_letter_queue, l.queue_dead_letter_queue) AS dead_letter_queue,
               CASE WHEN NOT l.leased THEN NULL
                    WHEN l.max = 1 THEN l.secret
                    ELSE sha256(l.secret || int8send(l.sequence)) END AS lease_token,
               NOT l.leased AS ready
        FROM (SELECT d.*, d.n = 1 OR d.n <= d.max AND d.before < d.max_response_bytes AS leased FROM drawn d) l
        CROSS JOIN t
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
        -- One timer set a claim that leased copies.
        INSERT INTO skipq.timer_sets (due_at, queue_id, sequences)
        SELECT t.now + make_interval(secs => k.visibility_seconds), k.queue_id,
               ARRAY(SELECT c.sequence FROM made c WHERE c.claim = k.claim AND NOT c.ready)
        FROM k CROSS JOIN t
        WHERE EXISTS (SELECT 1 FROM made c WHERE c.claim = k.claim AND NOT c.ready)
    )
    SELECT c.claim, c.queue_id, c.sequence, c.message_id, c.client_id, c.metadata, c.body, c.body_binary,
           c.tags - 'skipq.body', c.sent_at, c.visible_at, NULL::timestamptz, c.expires_at, c.receive_count,
           c.first_received_at, c.max_receive_count, c.dead_letter_queue, NULL::text, NULL::timestamptz,
           c.lease_token, c.ready, NULL::text
    FROM made c
    WHERE NOT c.ready;
END $$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION skipq.topic_copies_make_queues(p_claims integer[], p_queue_ids bigint[], p_max integer[], p_now timestamp with time zone, p_visibility_seconds integer[], p_max_response_bytes bigint[], p_message_overheads bigint[]) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_queues(p_now timestamp with time zone, p_tenants text[], p_queues text[], p_max_messages integer[], p_visibility_seconds integer[], p_key_ids bigint[], p_max_response_bytes bigint[], p_message_overheads bigint[], p_modes text[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    -- The pending-first claims probed for ready and pending rows here,
    -- and of those the claims made together by
    -- skipq.topic_copies_make_queues.
    v_probed     integer[];
    v_claims     integer[];
    v_queue_ids  bigint[];
    v_max        integer[];
    v_visibility integer[];
    v_budgets    bigint[];
    v_overheads  bigint[];
BEGIN
    -- PL/pgSQL, not SQL: a SQL function with SET clauses is never inlined,
    -- and its query was planned on every call (about 1 M instructions);
    -- PL/pgSQL keeps one plan for the session, which the settings hold to
    -- the same probes.
    --
    -- Claim i takes up to p_max_messages[i] of queue p_queues[i] as
    -- skipq.message_claim does (at most one message of a FIFO group),
    -- under p_key_ids[i], in mode p_modes[i] ('claim' or
    -- 'claim_pending_first'; NULL, or p_modes NULL: 'claim'); each claim's
    -- rows in answer order (the claims' own order as the statement found
    -- them, which the node does not need: it reads the claim's index). A
    -- topic copy comes with its stored body in place of its empty one and
    -- without the tag that named it (one primary-key probe of
    -- skipq.topic_bodies: the settings keep the planner from joining the
    -- whole table); a copy whose body is gone keeps both.
    --
    -- A pending-first claim of fewer than 32 messages of a topic group,
    -- the first claim of its queue here, is probed here for ready and
    -- pending rows, as skipq.message_claim's pending-first mode probes;
    -- one whose group has no ready message and pending copies is made
    -- with the others like it in one statement
    -- (skipq.topic_copies_make_queues): a shared claim paid the make
    -- statement's start-up once a group, most of a group's claim of one,
    -- and a publish wakes a receiver on each of its groups at once. Every
    -- other claim is made by skipq.message_claim, the probed ones (made
    -- together or not) in mode 'claim': their probe is done, and a claim
    -- made together that found no pending row free gets what the walk
    -- finds. A shared claim with no claim to make together runs the
    -- statement it ran before 00063 (a pending-first one pays the probe
    -- statement besides: 2.6 % more for ten groups that all hold ready
    -- messages, callgrind): one statement for both cases (the make gated
    -- by a one-time filter, an anti-join with nothing) cost a shared
    -- claim of ten plain queues 2 % more (6.94 M instructions against
    -- 6.80 M).
    IF 'claim_pending_first' = ANY(p_modes) THEN
        SELECT array_agg(e.claim), array_agg(e.claim) FILTER (WHERE e.make),
               array_agg(e.queue_id) FILTER (WHERE e.make), array_agg(e.max_messages) FILTER (WHERE e.make),
               array_agg(e.visibility_seconds) FILTER (WHERE e.make),
               array_agg(e.max_response_bytes) FILTER (WHERE e.make),
               array_agg(e.message_overhead) FILTER (WHERE e.make)
        INTO v_probed, v_claims, v_queue_ids, v_max, v_visibility, v_budgets, v_overheads
        FROM (SELECT k.claim::integer, q.id AS queue_id, k.max_messages,
                     coalesce(k.visibility_seconds, q.visibility_seconds) AS visibility_seconds,
                     k.max_response_bytes, k.message_overhead,
                     NOT EXISTS (SELECT 1 FROM skipq.ready r WHERE r.queue_id = q.id)
                         AND EXISTS (SELECT 1 FROM skipq.topic_pending p WHERE p.queue_id = q.id) AS make
              FROM unnest(p_tenants, p_queues, p_max_messages, p_visibility_seconds, p_max_response_bytes,
                          p_message_overheads, p_modes)
                       WITH ORDINALITY AS k(tenant, queue, max_messages, visibility_seconds, max_response_bytes,
                                            message_overhead, mode, claim)
              JOIN skipq.queues q ON q.tenant = k.tenant AND q.name = k.queue
              WHERE k.mode = 'claim_pending_first' AND k.max_messages < 32 AND NOT q.fifo
                AND NOT EXISTS (SELECT 1 FROM unnest(p_tenants, p_queues) WITH ORDINALITY AS e(tenant, queue, claim)
                                WHERE e.claim < k.claim AND e.tenant = k.tenant AND e.queue = k.queue)
              OFFSET 0) e;  -- a fence: pulled up, make's probes would run once an aggregate
    END IF;
    IF v_claims IS NULL THEN
        RETURN QUERY
        SELECT k.claim::integer, m.queue_id, m.sequence, m.message_id, m.client_id, m.metadata,
               coalesce(b.body, m.body), m.body_binary,
               CASE WHEN b.body IS NULL THEN m.tags ELSE m.tags - 'skipq.body' END,
               m.sent_at, m.visible_at, m.delayed_to, m.expires_at, m.receive_count, m.first_received_at,
               m.max_receive_count, m.dead_letter_queue, m.re_routed_from, m.dead_lettered_at, m.lease_token,
               m.ready, m.group_id
        FROM unnest(p_tenants, p_queues, p_max_messages, p_visibility_seconds, p_key_ids, p_max_response_bytes,
                    p_message_overheads, p_modes)
                 WITH ORDINALITY AS k(tenant, queue, max_messages, visibility_seconds, key_id, max_response_bytes,
                                      message_overhead, mode, claim)
        CROSS JOIN LATERAL skipq.message_claim(k.tenant, k.queue, p_now, k.visibility_seconds, k.max_messages,
            k.max_response_bytes, k.message_overhead, k.key_id, 1,
            CASE WHEN k.claim = ANY(v_probed) THEN 'claim' ELSE coalesce(k.mode, 'claim') END) WITH ORDINALITY AS m
        LEFT JOIN LATERAL (SELECT d.body FROM skipq.topic_bodies d
                           WHERE m.tags ? 'skipq.body' AND d.id = (m.tags ->> 'skipq.body')::bigint) b ON true
        ORDER BY k.claim, m.ordinality;
        RETURN;
    END IF;
    -- The made claims' rows come first (the CTE, volatile, runs once, to
    -- the end, before the second branch reads it).
    RETURN QUERY
    WITH made AS (
        SELECT * FROM skipq.topic_copies_make_queues(v_claims, v_queue_ids, v_max, p_now, v_visibility,
                                                     v_budgets, v_overheads)
    )
    SELECT * FROM made
    UNION ALL
    (SELECT k.claim::integer, m.queue_id, m.sequence, m.message_id, m.client_id, m.metadata,
            coalesce(b.body, m.body), m.body_binary,
            CASE WHEN b.body IS NULL THEN m.tags ELSE m.tags - 'skipq.body' END,
            m.sent_at, m.visible_at, m.delayed_to, m.expires_at, m.receive_count, m.first_received_at,
            m.max_receive_count, m.dead_letter_queue, m.re_routed_from, m.dead_lettered_at, m.lease_token,
            m.ready, m.group_id
     FROM unnest(p_tenants, p_queues, p_max_messages, p_visibility_seconds, p_key_ids, p_max_response_bytes,
                 p_message_overheads, p_modes)
              WITH ORDINALITY AS k(tenant, queue, max_messages, visibility_seconds, key_id, max_response_bytes,
                                   message_overhead, mode, claim)
     CROSS JOIN LATERAL skipq.message_claim(k.tenant, k.queue, p_now, k.visibility_seconds, k.max_messages,
         k.max_response_bytes, k.message_overhead, k.key_id, 1,
         CASE WHEN k.claim = ANY(v_probed) THEN 'claim' ELSE coalesce(k.mode, 'claim') END) WITH ORDINALITY AS m
     LEFT JOIN LATERAL (SELECT d.body FROM skipq.topic_bodies d
                        WHERE m.tags ? 'skipq.body' AND d.id = (m.tags ->> 'skipq.body')::bigint) b ON true
     WHERE NOT EXISTS (SELECT 1 FROM made x WHERE x.claim = k.claim)
     ORDER BY k.claim, m.ordinality);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION skipq.topic_copies_make_queues(p_claims integer[], p_queue_ids bigint[], p_max integer[], p_now timestamp with time zone, p_visibility_seconds integer[], p_max_response_bytes bigint[], p_message_overheads bigint[]);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_queues(p_now timestamp with time zone, p_tenants text[], p_queues text[], p_max_messages integer[], p_visibility_seconds integer[], p_key_ids bigint[], p_max_response_bytes bigint[], p_message_overheads bigint[], p_modes text[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
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
