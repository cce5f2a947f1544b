-- +goose Up
-- A topic group's claims of few messages, cheaper (docs/DESIGN.md, "Whole
-- pending rows (00062)"): skipq.topic_copies_make, for a claim of fewer
-- than 32, takes the pending row it locks whole, leasing what the claim
-- asked for and making the rest ready messages for the group's next
-- claims, where it cut the ids taken from the row; and skipq.receive drops
-- the skipq.body tag of every topic copy it returns, where it dropped it
-- only from the copies its claim made.
-- Changed bodies (same signatures): skipq.topic_copies_make, skipq.receive.

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
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_fifo boolean;
BEGIN
    IF receive.tenant IS NULL OR receive.tenant = '' THEN
        RAISE EXCEPTION 'skipq: tenant must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.fifo INTO v_fifo FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name;
    IF NOT FOUND THEN
        PERFORM skipq.check_queue_name('queue_name', queue_name);
    END IF;
    IF max_messages IS NULL OR max_messages NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'skipq: max_messages must be between 1 and 1024' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF visibility_seconds NOT BETWEEN 1 AND 43200 THEN
        RAISE EXCEPTION 'skipq: visibility_seconds must be between 1 and 43200' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_messages_per_group IS NULL OR max_messages_per_group NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'skipq: max_messages_per_group must be between 1 and 10'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- In the claim's order: a standard queue's by sequence, a FIFO
    -- queue's groups in rotation, each group's run in order. The handle as
    -- service/receipt.go encodes it (base64url, no padding; 48 bytes give
    -- 64 characters, under encode()'s 76 per line), its alphabet by
    -- replace() (receipt_parse says why not translate()). A group only from a
    -- FIFO queue, as the standard queue's answer always had none. A topic
    -- copy's body is the stored one, and its tags are without the one that
    -- names it, whether the claim made the copy (and returned it so) or the
    -- copy was a ready message (until 00062 its tags kept it).
    RETURN QUERY
    SELECT replace(replace(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+', '-'), '/', '_'),
           queue_name, m.message_id, m.sequence,
           CASE WHEN v_fifo THEN m.group_id END, m.client_id, m.metadata,
           CASE WHEN m.tags ? 'skipq.body' THEN skipq.topic_body(m.body, m.tags) ELSE m.body END,
           m.body_binary, CASE WHEN m.tags ? 'skipq.body' THEN m.tags - 'skipq.body' ELSE m.tags END, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0, NULL, max_messages_per_group, 'claim') m;
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
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_fifo boolean;
BEGIN
    IF receive.tenant IS NULL OR receive.tenant = '' THEN
        RAISE EXCEPTION 'skipq: tenant must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.fifo INTO v_fifo FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name;
    IF NOT FOUND THEN
        PERFORM skipq.check_queue_name('queue_name', queue_name);
    END IF;
    IF max_messages IS NULL OR max_messages NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'skipq: max_messages must be between 1 and 1024' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF visibility_seconds NOT BETWEEN 1 AND 43200 THEN
        RAISE EXCEPTION 'skipq: visibility_seconds must be between 1 and 43200' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_messages_per_group IS NULL OR max_messages_per_group NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'skipq: max_messages_per_group must be between 1 and 10'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- In the claim's order: a standard queue's by sequence, a FIFO
    -- queue's groups in rotation, each group's run in order. The handle as
    -- service/receipt.go encodes it (base64url, no padding; 48 bytes give
    -- 64 characters, under encode()'s 76 per line), its alphabet by
    -- replace() (receipt_parse says why not translate()). A group only from a
    -- FIFO queue, as the standard queue's answer always had none.
    RETURN QUERY
    SELECT replace(replace(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+', '-'), '/', '_'),
           queue_name, m.message_id, m.sequence,
           CASE WHEN v_fifo THEN m.group_id END, m.client_id, m.metadata,
           CASE WHEN m.tags ? 'skipq.body' THEN skipq.topic_body(m.body, m.tags) ELSE m.body END,
           m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0, NULL, max_messages_per_group, 'claim') m;
END $$;
-- +goose StatementEnd
