-- +goose Up
-- Retention of settled messages (SPEC §16.4). A queue with a row in
-- skipq.queue_retention (migration 00027) keeps an acked message for its
-- seconds, then the worker's expiry sweep removes it.
--
-- A retained message stays in skipq.messages, out of every path a live
-- message takes (skipq.message_retain is its one writer):
--   - lease_token is the empty bytea: no receipt (32 bytes of token)
--     matches it, so a second ack, a nack or an extend of its receipt
--     answers as for a settled message, and message_state reads it as
--     'acked' (a marker among message_state's arguments, so that every
--     query using it, search's walk included, reports the state as it is);
--   - visible_at = expires_at = the end of its retention: the expiry sweep
--     (messages_expires_at_idx) removes it then, and a lease timer still
--     filed for it finds it never visible before it expired
--     (MessageLockDue), so it is never readied or dead-lettered again;
--   - it is not ready and has no ready row;
--   - group_id is cleared: FIFO groups are found, held and pruned by their
--     messages in messages_group_idx (skipq.group_has_messages,
--     group_release, message_claim_grouped's head), where a retained
--     message must not count;
--   - dead_lettered_at is cleared: acked, it is no dead letter any more
--     (GET /v1/dlq and redrive walk messages_dead_lettered_idx);
--   - the ack's time and the group it left ride in its tags under the
--     reserved key "skipq.acked" (native tag keys may not start with
--     "skipq.", as for "skipq.sqs"), a JSON document {"at", "g"}.
-- No column is added to skipq.messages: a new column changes the row type
-- that the claim and settle functions return, and every call of a node of
-- the previous release in flight while it is added fails ("structure of
-- query does not match function result type"). Its row and message id
-- remain: a send with the same messageId is a duplicate while it is
-- retained (skipq.message_insert finds the message). No new index: a claim
-- still changes only unindexed columns (HOT).

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_state(
    p_visible_at timestamptz, p_receive_count integer, p_max_receive_count integer,
    p_lease_token bytea, p_now timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_lease_token = '\x'::bytea THEN 'acked'
        WHEN p_visible_at <= p_now AND p_receive_count < p_max_receive_count THEN 'available'
        WHEN p_lease_token IS NULL AND p_visible_at > p_now THEN 'delayed'
        ELSE 'in_flight' END
$$;
-- +goose StatementEnd

-- skipq.message_retain turns messages that the caller holds locked (a
-- lease the ack matched, a claim of autoAck) into retained ones for
-- p_seconds[i] from p_now, and returns them as they were before (the acks'
-- callers credit each handle by its token; autoAck reports the delivery as
-- the row was). p_delivered: the ack is an autoAck receive, which counts a
-- delivery. A statement of its own after the one that locked the rows: its
-- snapshot sees their latest versions, and the ready rows committed with
-- them.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_retain(p_queue_ids bigint[], p_sequences bigint[], p_seconds integer[],
    p_now timestamptz, p_delivered boolean)
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
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
REVOKE ALL ON FUNCTION skipq.message_retain(bigint[], bigint[], integer[], timestamptz, boolean) FROM PUBLIC;

-- The ack (HTTP, SQS DeleteMessage, skipq.ack and skipq.try_ack): as
-- before on queues that keep nothing; on the others, the matched messages
-- are locked and retained instead of deleted.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_ack(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[])
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_retain boolean;
    v_gq     bigint[];
    v_gg     text[];
    v_rq     bigint[];
    v_rs     bigint[];
    v_rt     integer[];
BEGIN
    v_retain := EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = ANY(p_queue_ids));
    -- The groups of FIFO messages, read before they change.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                              AND m.group_id IS NOT NULL) m;
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
            RETURN QUERY SELECT * FROM skipq.message_retain(v_rq, v_rs, v_rt, clock_timestamp(), false);
        END IF;
    END IF;
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd

-- autoAck receive of a standard queue: the claim (as before) takes the
-- messages; a queue that keeps nothing deletes them, the others retain
-- them (an autoAck is an ack), counting the delivery.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_and_delete(p_tenant text, p_queue text, p_now timestamptz, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint)
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    q        skipq.queues;
    v_retain integer;
    v_seqs   bigint[];
BEGIN
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND NOT x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT r.seconds INTO v_retain FROM skipq.queue_retention r WHERE r.queue_id = q.id;
    WITH walked AS (
        SELECT c.sequence, c.size
        FROM (SELECT r.queue_id, r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence) r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = r.queue_id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > coalesce(p_now, clock_timestamp()))
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
        RETURN QUERY SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
            array_fill(v_retain, ARRAY[cardinality(v_seqs)]), coalesce(p_now, clock_timestamp()), true);
        RETURN;
    END IF;
    RETURN QUERY
    WITH unready AS (
        DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
    )
    DELETE FROM skipq.messages m
    WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
    RETURNING m.*;
END $$;
-- +goose StatementEnd

-- autoAck receive of a FIFO queue ('delete' mode): retains like
-- message_claim_and_delete on a queue that keeps acked messages; otherwise
-- as in migration 00016.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamptz,
    p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer,
    p_max_response_bytes bigint, p_message_overhead bigint, p_mode text)
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    q        skipq.queues;
    v_groups text[];
    v_heads  bigint[];
    v_now    timestamptz;
    v_until  timestamptz;
    v_seqs   bigint[];
    v_taken  text[];
    v_retain integer;
BEGIN
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT array_agg(s.group_id ORDER BY s.turn), array_agg(s.head ORDER BY s.turn) INTO v_groups, v_heads
    FROM (SELECT g.group_id, g.turn, h.sequence AS head
          FROM skipq.message_groups g
          CROSS JOIN LATERAL (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                              WHERE (h.queue_id::text || '/' || h.group_id) = (g.queue_id::text || '/' || g.group_id)
                                AND h.group_id IS NOT NULL
                              ORDER BY h.sequence LIMIT 1) h
          WHERE g.queue_id = q.id
            AND g.leased_until <= coalesce(p_now, clock_timestamp())
            AND h.ready AND (h.expires_at IS NULL OR h.expires_at > coalesce(p_now, clock_timestamp()))
          ORDER BY g.turn
          LIMIT p_max_messages
          FOR NO KEY UPDATE OF g SKIP LOCKED) s;
    IF v_groups IS NULL THEN
        RETURN;
    END IF;

    WITH t AS MATERIALIZED (
        SELECT coalesce(p_now, clock_timestamp()) AS now
    ), run AS (
        -- One message a group: its first, found by statement 1.
        SELECT x.ord, x.head AS sequence, 1::bigint AS rn
        FROM unnest(v_heads) WITH ORDINALITY AS x(head, ord)
        WHERE p_max_per_group = 1
        UNION ALL
        SELECT x.ord, r.sequence, r.rn
        FROM unnest(v_groups) WITH ORDINALITY AS x(group_id, ord)
        CROSS JOIN LATERAL (
            SELECT h.sequence, row_number() OVER w AS rn,
                   bool_and(h.ready AND (h.expires_at IS NULL OR h.expires_at > (SELECT t.now FROM t))) OVER w AS ok
            FROM (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                  WHERE (h.queue_id::text || '/' || h.group_id) = (q.id::text || '/' || x.group_id)
                    AND h.group_id IS NOT NULL
                  ORDER BY h.sequence LIMIT p_max_per_group) h
            WINDOW w AS (ORDER BY h.sequence ROWS UNBOUNDED PRECEDING)) r
        WHERE r.ok AND p_max_per_group > 1
    ), locked AS (
        SELECT r.ord, r.rn, c.sequence, c.size
        FROM run r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   CASE WHEN c.body_binary THEN (octet_length(c.body)::bigint + 2) / 3 * 4
                             ELSE octet_length(c.body)::bigint END
                        + octet_length(c.metadata) + octet_length(c.tags::text) + octet_length(c.message_id)
                        + octet_length(c.client_id) + coalesce(octet_length(c.re_routed_from), 0)
                        + octet_length(c.group_id) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = q.id AND c.sequence = r.sequence
              AND c.ready AND (c.expires_at IS NULL OR c.expires_at > (SELECT t.now FROM t))
            FOR UPDATE SKIP LOCKED) c
    ), kept AS (
        SELECT l.ord, l.sequence, l.size
        FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
        WHERE l.k = l.rn
    ), picked AS (
        SELECT w.ord, w.sequence FROM (
            SELECT w.ord, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM kept w
            WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
    )
    SELECT (SELECT t.now FROM t), array_agg(p.sequence ORDER BY p.ord, p.sequence),
           array_agg(DISTINCT v_groups[p.ord])
    INTO v_now, v_seqs, v_taken
    FROM picked p;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;

    IF p_mode = 'peek' THEN
        RETURN QUERY
        SELECT m.* FROM unnest(v_seqs) WITH ORDINALITY AS s(sequence, n)
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m WHERE m.queue_id = q.id AND m.sequence = s.sequence) m
        ORDER BY s.n;
        RETURN;
    END IF;

    v_until := v_now + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
    UPDATE skipq.message_groups g
    SET turn = nextval('skipq.group_turn'),
        leased_until = CASE WHEN p_mode = 'claim' THEN v_until ELSE g.leased_until END
    WHERE g.queue_id = q.id AND g.group_id = ANY(v_taken);

    IF p_mode = 'delete' THEN
        SELECT x.seconds INTO v_retain FROM skipq.queue_retention x WHERE x.queue_id = q.id;
    END IF;
    IF p_mode = 'claim' THEN
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT v_until, q.id, s.sequence FROM unnest(v_seqs) AS s(sequence)
        ), claimed AS (
            UPDATE skipq.messages m
            SET visible_at        = v_until,
                receive_count     = m.receive_count + 1,
                first_received_at = coalesce(m.first_received_at, v_now),
                lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
                ready             = false
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        )
        SELECT c.* FROM claimed c ORDER BY array_position(v_seqs, c.sequence);
    ELSIF v_retain IS NOT NULL THEN
        -- autoAck on a queue that keeps acked messages (message_claim_and_delete).
        RETURN QUERY
        SELECT r.* FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
            array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true) r
        ORDER BY array_position(v_seqs, r.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    ELSE
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), gone AS (
            DELETE FROM skipq.messages m
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        )
        SELECT c.* FROM gone c ORDER BY array_position(v_seqs, c.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamptz,
    p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer,
    p_max_response_bytes bigint, p_message_overhead bigint, p_mode text)
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    q        skipq.queues;
    v_groups text[];
    v_heads  bigint[];
    v_now    timestamptz;
    v_until  timestamptz;
    v_seqs   bigint[];
    v_taken  text[];
BEGIN
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT array_agg(s.group_id ORDER BY s.turn), array_agg(s.head ORDER BY s.turn) INTO v_groups, v_heads
    FROM (SELECT g.group_id, g.turn, h.sequence AS head
          FROM skipq.message_groups g
          CROSS JOIN LATERAL (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                              WHERE (h.queue_id::text || '/' || h.group_id) = (g.queue_id::text || '/' || g.group_id)
                                AND h.group_id IS NOT NULL
                              ORDER BY h.sequence LIMIT 1) h
          WHERE g.queue_id = q.id
            AND g.leased_until <= coalesce(p_now, clock_timestamp())
            AND h.ready AND (h.expires_at IS NULL OR h.expires_at > coalesce(p_now, clock_timestamp()))
          ORDER BY g.turn
          LIMIT p_max_messages
          FOR NO KEY UPDATE OF g SKIP LOCKED) s;
    IF v_groups IS NULL THEN
        RETURN;
    END IF;

    WITH t AS MATERIALIZED (
        SELECT coalesce(p_now, clock_timestamp()) AS now
    ), run AS (
        -- One message a group: its first, found by statement 1.
        SELECT x.ord, x.head AS sequence, 1::bigint AS rn
        FROM unnest(v_heads) WITH ORDINALITY AS x(head, ord)
        WHERE p_max_per_group = 1
        UNION ALL
        SELECT x.ord, r.sequence, r.rn
        FROM unnest(v_groups) WITH ORDINALITY AS x(group_id, ord)
        CROSS JOIN LATERAL (
            SELECT h.sequence, row_number() OVER w AS rn,
                   bool_and(h.ready AND (h.expires_at IS NULL OR h.expires_at > (SELECT t.now FROM t))) OVER w AS ok
            FROM (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                  WHERE (h.queue_id::text || '/' || h.group_id) = (q.id::text || '/' || x.group_id)
                    AND h.group_id IS NOT NULL
                  ORDER BY h.sequence LIMIT p_max_per_group) h
            WINDOW w AS (ORDER BY h.sequence ROWS UNBOUNDED PRECEDING)) r
        WHERE r.ok AND p_max_per_group > 1
    ), locked AS (
        SELECT r.ord, r.rn, c.sequence, c.size
        FROM run r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   CASE WHEN c.body_binary THEN (octet_length(c.body)::bigint + 2) / 3 * 4
                             ELSE octet_length(c.body)::bigint END
                        + octet_length(c.metadata) + octet_length(c.tags::text) + octet_length(c.message_id)
                        + octet_length(c.client_id) + coalesce(octet_length(c.re_routed_from), 0)
                        + octet_length(c.group_id) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = q.id AND c.sequence = r.sequence
              AND c.ready AND (c.expires_at IS NULL OR c.expires_at > (SELECT t.now FROM t))
            FOR UPDATE SKIP LOCKED) c
    ), kept AS (
        SELECT l.ord, l.sequence, l.size
        FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
        WHERE l.k = l.rn
    ), picked AS (
        SELECT w.ord, w.sequence FROM (
            SELECT w.ord, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM kept w
            WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
    )
    SELECT (SELECT t.now FROM t), array_agg(p.sequence ORDER BY p.ord, p.sequence),
           array_agg(DISTINCT v_groups[p.ord])
    INTO v_now, v_seqs, v_taken
    FROM picked p;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;

    IF p_mode = 'peek' THEN
        RETURN QUERY
        SELECT m.* FROM unnest(v_seqs) WITH ORDINALITY AS s(sequence, n)
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m WHERE m.queue_id = q.id AND m.sequence = s.sequence) m
        ORDER BY s.n;
        RETURN;
    END IF;

    v_until := v_now + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
    UPDATE skipq.message_groups g
    SET turn = nextval('skipq.group_turn'),
        leased_until = CASE WHEN p_mode = 'claim' THEN v_until ELSE g.leased_until END
    WHERE g.queue_id = q.id AND g.group_id = ANY(v_taken);

    IF p_mode = 'claim' THEN
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT v_until, q.id, s.sequence FROM unnest(v_seqs) AS s(sequence)
        ), claimed AS (
            UPDATE skipq.messages m
            SET visible_at        = v_until,
                receive_count     = m.receive_count + 1,
                first_received_at = coalesce(m.first_received_at, v_now),
                lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
                ready             = false
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        )
        SELECT c.* FROM claimed c ORDER BY array_position(v_seqs, c.sequence);
    ELSE
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), gone AS (
            DELETE FROM skipq.messages m
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        )
        SELECT c.* FROM gone c ORDER BY array_position(v_seqs, c.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    END IF;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_and_delete(p_tenant text, p_queue text, p_now timestamptz, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint)
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH walked AS (
        SELECT c.queue_id, c.sequence, c.size
        FROM (SELECT r.queue_id, r.sequence FROM skipq.ready r
              WHERE r.queue_id = (SELECT q.id FROM skipq.queues q
                                  WHERE q.tenant = p_tenant AND q.name = p_queue AND NOT q.fifo)
              ORDER BY r.sequence) r
        CROSS JOIN LATERAL (
            SELECT c.queue_id, c.sequence,
                   CASE WHEN c.body_binary THEN (octet_length(c.body)::bigint + 2) / 3 * 4
                             ELSE octet_length(c.body)::bigint END
                        + octet_length(c.metadata) + octet_length(c.tags::text) + octet_length(c.message_id)
                        + octet_length(c.client_id) + coalesce(octet_length(c.re_routed_from), 0)
                        + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = r.queue_id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > coalesce(p_now, clock_timestamp()))
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    ), picked AS (
        SELECT w.queue_id, w.sequence FROM (
            SELECT w.queue_id, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM walked w
            WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n = 1 OR w.before < p_max_response_bytes
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
          AND r.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
    )
    DELETE FROM skipq.messages m
    WHERE m.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
      AND m.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
    RETURNING m.*;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_ack(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[])
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_gq bigint[];
    v_gg text[];
BEGIN
    -- The groups of FIFO messages, read before they change.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                              AND m.group_id IS NOT NULL) m;
    END IF;
    RETURN QUERY
    WITH gone AS (
        DELETE FROM skipq.messages m
        USING (SELECT unnest(p_queue_ids::bigint[]) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM gone g
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence) x WHERE g.ready))
    )
    SELECT gone.* FROM gone;
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_retain(bigint[], bigint[], integer[], timestamptz, boolean);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_state(
    p_visible_at timestamptz, p_receive_count integer, p_max_receive_count integer,
    p_lease_token bytea, p_now timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_visible_at <= p_now AND p_receive_count < p_max_receive_count THEN 'available'
        WHEN p_lease_token IS NULL AND p_visible_at > p_now THEN 'delayed'
        ELSE 'in_flight' END
$$;
-- +goose StatementEnd
-- Retained messages are acked ones: without this migration they go.
DELETE FROM skipq.messages WHERE lease_token = '\x'::bytea;
