-- +goose Up
-- A topic group's drain, cheaper (docs/DESIGN.md, "Whole rows up to 32
-- ids (00064)"): a claim of fewer than 32 took one pending row whole, and
-- a row holds the ids of one publish statement, so a group published to
-- one message a request (sixteen publishers, the node sharing their
-- statements: 7.6 ids a row) paid the make statement's start-up every 8
-- messages; it now takes as many of the oldest rows as hold 32 ids (at
-- most 8).
-- Changed bodies (same signatures): skipq.topic_copies_make,
-- skipq.topic_copies_make_queues.

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
    -- order, or, with p_body_ids NULL, of ids taken from the queue's oldest
    -- pending rows that no other transaction holds, in order, locked FOR
    -- UPDATE SKIP LOCKED. A claim of fewer than 32 takes whole rows, as many
    -- of the oldest as hold 32 ids together (a row holds at most 32; at
    -- most 8 rows, counted in the statement's snapshot: a concurrent claim
    -- may hold those, and this one then locks as many others, whatever
    -- they hold): it leases what it asked for and
    -- makes the rest ready messages, which the group's next claims take as
    -- any claim takes. Until 00062 it cut the ids it took from the front of
    -- its row, so a group's claims of one made a copy each, and each paid
    -- this statement's start-up (about half a plain claim of one,
    -- callgrind); until 00064 it took one row, and rows are as large as the
    -- publish statements that wrote them (a publish of one message a
    -- request, shared by the node's concurrent requests, wrote 7.6 ids a
    -- row): a claim of one paid the start-up every 8 messages, where it now
    -- pays it every 28 or so. A larger claim locks as many rows as p_max ids
    -- fill when full (32 each) and takes up to p_max ids: each row taken
    -- whole is deleted, the last cut from the front otherwise (its surplus
    -- made ready would make the next claim walk them and then make copies
    -- too). Every row locked is taken from (the rows
    -- before the last hold fewer than p_max ids together): a row locked and
    -- not taken from would stay hidden from the other claims until this one
    -- commits. A copy is a message row as a publish used to write it (empty
    -- body, the stored one named by its skipq.body tag; the queue's defaults
    -- where the publish gave none), sent_at its publish. With
    -- p_visibility_seconds the copies are a claim's: leased to the caller as
    -- skipq.message_claim leases (one secret, each token SHA-256 of it and
    -- the sequence, the secret itself for a claim of one; one timer set),
    -- within p_max_response_bytes as that claim measures (the first always
    -- fits), and returned with their stored body in place and without the
    -- skipq.body tag, as skipq.message_claim_queues returns a copy it filled
    -- (so the node reads no bodies after the claim); the copies past p_max or
    -- the budget are made ready. Without it every copy is made ready (a ready
    -- row each) and none is returned. A copy that expired before it was made
    -- is not made. A copy whose message id the queue already holds gets a
    -- fresh one (UUIDv7), as a message moved into a queue holding its id
    -- does: the publish drew the id, but a copy of another group may have
    -- moved here (a dead-letter queue or requeue target subscribed to the
    -- same topic) while this one was pending. One probe of
    -- messages_message_id_queue_key a copy. An insert of the id that another
    -- transaction has not committed yet is not seen by the probe: the copy's
    -- insert waits for it and, if it commits, fails with a unique violation
    -- (the statement, and the changes of the pending rows, roll back: nothing
    -- is lost, and a claim made again sees the id and draws a fresh one;
    -- package db's claims make it again once). Until 00061 an ON CONFLICT DO
    -- NOTHING dropped that copy instead, and the speculative insert cost
    -- 24,000 instructions a copy.
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
        ORDER BY p.id
        -- A claim of fewer than 32: as many of the oldest rows as hold 32
        -- ids together, read without a lock (an InitPlan, run once).
        LIMIT CASE WHEN p_max >= 32 THEN (p_max + 31) / 32
                   ELSE (SELECT count(*) FROM (
                             SELECT sum(cardinality(h.body_ids)) OVER w AS through
                             FROM (SELECT h.body_ids FROM skipq.topic_pending h
                                   WHERE p_body_ids IS NULL AND h.queue_id = q.id ORDER BY h.id LIMIT 8) h
                             WINDOW w AS (ROWS UNBOUNDED PRECEDING)) h
                         WHERE h.through <= 32) END
        FOR UPDATE SKIP LOCKED
    ), taken AS (
        -- Each row's ids taken: a claim of fewer than 32 all of each
        -- row's; a larger one as many as the rows before it left room for
        -- (before: their ids, in the order locked; any order would do,
        -- each row is left room for at least one).
        SELECT k.id, CASE WHEN p_max < 32 THEN k.body_ids ELSE k.body_ids[:p_max - k.before] END AS ids,
               p_max >= 32 AND k.before + cardinality(k.body_ids) > p_max AS cut
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
                         OR row_number() OVER w <= p_max
                            AND sum(d.wire::float8) OVER w - d.wire < p_max_response_bytes) AS leased
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
CREATE OR REPLACE FUNCTION skipq.topic_copies_make_queues(p_claims integer[], p_queue_ids bigint[], p_max integer[], p_now timestamp with time zone, p_visibility_seconds integer[], p_max_response_bytes bigint[], p_message_overheads bigint[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- Called by skipq.message_claim_queues only, whose plan settings (no
    -- joins or scans but the ones meant; generic plans) apply here too.
    --
    -- Claim p_claims[i] takes the oldest pending rows of queue
    -- p_queue_ids[i] that no other transaction holds (FOR UPDATE SKIP
    -- LOCKED) whole, as many as hold 32 ids, as skipq.topic_copies_make
    -- does for a claim of fewer than 32 (it says how many): it leases up
    -- to p_max[i] (fewer than 32) of the rows' copies for
    -- p_visibility_seconds[i], within p_max_response_bytes[i] (each copy
    -- measured with p_message_overheads[i]; the first always fits), and
    -- makes the rest ready messages. The queues must differ:
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
    -- Each claim's running count and size are a window over its rows'
    -- ids in a lateral of its own (the rows taken, read for the claim):
    -- no window partitions by claim, which would sort the copies with
    -- their bodies.
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
        SELECT k.claim, k.queue_id, p.id, p.body_ids
        FROM k CROSS JOIN LATERAL (
            SELECT p.id, p.body_ids FROM skipq.topic_pending p
            WHERE p.queue_id = k.queue_id
            ORDER BY p.id
            -- How many rows, as skipq.topic_copies_make counts them.
            LIMIT (SELECT count(*) FROM (
                       SELECT sum(cardinality(h.body_ids)) OVER w AS through
                       FROM (SELECT h.body_ids FROM skipq.topic_pending h
                             WHERE h.queue_id = k.queue_id ORDER BY h.id LIMIT 8) h
                       WINDOW w AS (ROWS UNBOUNDED PRECEDING)) h
                   WHERE h.through <= 32)
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
        FROM k x CROSS JOIN LATERAL (
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
                    FROM (SELECT r.body_ids FROM taken r WHERE r.claim = x.claim) r
                    CROSS JOIN LATERAL unnest(r.body_ids) AS u(id)
                    CROSS JOIN LATERAL (
                        SELECT d.message_id, c.client_id, c.metadata, c.body_binary, c.tags, d.published_at,
                               c.expiration_seconds, c.max_receive_count, c.dead_letter_queue,
                               d.body, octet_length(d.body)::bigint AS size
                        FROM skipq.topic_bodies d JOIN skipq.topic_copy_parts c ON c.body_id = d.id
                        WHERE d.id = u.id) b) b
                WHERE b.expires_at IS NULL OR b.expires_at > (SELECT t.now FROM t)) d
            WINDOW w AS (ROWS UNBOUNDED PRECEDING)) d  -- the rows' order, each row's ids in theirs
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
    -- order, or, with p_body_ids NULL, of ids taken from the queue's oldest
    -- pending rows that no other transaction holds, in order: as many rows as
    -- p_max ids fill when full (32 each), locked FOR UPDATE SKIP LOCKED. A
    -- claim of fewer than 32 takes its one row whole: it leases what it asked
    -- for and makes the rest (at most 31) ready messages, which the group's
    -- next claims take as any claim takes. Until 00062 it cut the ids it took
    -- from the front of the row, so a group's claims of one made a copy each,
    -- and each paid this statement's start-up (about half a plain claim of
    -- one, callgrind); now one in up to 32 does. A larger claim takes up to
    -- p_max ids: each row taken whole is deleted, the last cut from the front
    -- otherwise (its surplus made ready would make the next claim walk them
    -- and then make copies too). Every row locked is taken from (the rows
    -- before the last hold fewer than p_max ids together): a row locked and
    -- not taken from would stay hidden from the other claims until this one
    -- commits. A copy is a message row as a publish used to write it (empty
    -- body, the stored one named by its skipq.body tag; the queue's defaults
    -- where the publish gave none), sent_at its publish. With
    -- p_visibility_seconds the copies are a claim's: leased to the caller as
    -- skipq.message_claim leases (one secret, each token SHA-256 of it and
    -- the sequence, the secret itself for a claim of one; one timer set),
    -- within p_max_response_bytes as that claim measures (the first always
    -- fits), and returned with their stored body in place and without the
    -- skipq.body tag, as skipq.message_claim_queues returns a copy it filled
    -- (so the node reads no bodies after the claim); the copies past p_max or
    -- the budget are made ready. Without it every copy is made ready (a ready
    -- row each) and none is returned. A copy that expired before it was made
    -- is not made. A copy whose message id the queue already holds gets a
    -- fresh one (UUIDv7), as a message moved into a queue holding its id
    -- does: the publish drew the id, but a copy of another group may have
    -- moved here (a dead-letter queue or requeue target subscribed to the
    -- same topic) while this one was pending. One probe of
    -- messages_message_id_queue_key a copy. An insert of the id that another
    -- transaction has not committed yet is not seen by the probe: the copy's
    -- insert waits for it and, if it commits, fails with a unique violation
    -- (the statement, and the changes of the pending rows, roll back: nothing
    -- is lost, and a claim made again sees the id and draws a fresh one;
    -- package db's claims make it again once). Until 00061 an ON CONFLICT DO
    -- NOTHING dropped that copy instead, and the speculative insert cost
    -- 24,000 instructions a copy.
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
        -- Each row's ids taken: a claim of fewer than 32 all of its one
        -- row's; a larger one as many as the rows before it left room for
        -- (before: their ids, in the order locked; any order would do,
        -- each row is left room for at least one).
        SELECT k.id, CASE WHEN p_max < 32 THEN k.body_ids ELSE k.body_ids[:p_max - k.before] END AS ids,
               p_max >= 32 AND k.before + cardinality(k.body_ids) > p_max AS cut
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
                         OR row_number() OVER w <= p_max
                            AND sum(d.wire::float8) OVER w - d.wire < p_max_response_bytes) AS leased
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
CREATE OR REPLACE FUNCTION skipq.topic_copies_make_queues(p_claims integer[], p_queue_ids bigint[], p_max integer[], p_now timestamp with time zone, p_visibility_seconds integer[], p_max_response_bytes bigint[], p_message_overheads bigint[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
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
