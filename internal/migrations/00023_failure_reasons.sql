-- +goose Up
-- Why a delivery failed, and why a message was dead-lettered (SPEC §16.1).
--
-- A message's latest failed delivery -- a nack (with the nack's reason) or
-- a lease that ran out (recorded by the worker when it readies the message,
-- MessageReady) -- rides in its tags under the reserved key
-- "skipq.failure"; a dead letter also carries "skipq.deadLetter" (why its
-- last delivery in the source failed, and the receive count reached there;
-- the source is re_routed_from, the time dead_lettered_at). Native senders
-- cannot use "skipq." keys (the same room as SQS attributes,
-- service.SQSTagKey), so every move that copies tags carries them (a
-- redrive drops them: MessageRedrive), the response budget measures them
-- with the tags, and no column is added: a new column would change the
-- row type that the claim functions return, and claims of the previous
-- release that are in flight while it is added fail ("structure of query
-- does not match function result type"; seen in TestOnlineMigration). The
-- claim never touches them.

-- failure_doc: one failed delivery as stored (and answered as lastFailure).
-- STABLE (timestamptz to JSON follows the session's TimeZone; readers parse
-- the offset), invoker's rights, no search_path, so that it is inlined.
CREATE FUNCTION skipq.failure_doc(p_cause text, p_reason text, p_at timestamptz, p_receive_count integer)
RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object('cause', p_cause, 'reason', p_reason, 'at', p_at, 'receiveCount', p_receive_count)
$$;
REVOKE ALL ON FUNCTION skipq.failure_doc(text, text, timestamptz, integer) FROM PUBLIC;

-- skipq.message_dead_letter carries the failure of the last delivery into
-- the dead letter. A message whose recorded failure is not of that delivery
-- (its receiveCount behind receive_count) is one whose lease ran out.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_dead_letter(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
                                          p_server_max_receive_count integer)
RETURNS TABLE (source_queue_id bigint, source_sequence bigint, tenant text, dead_letter_queue_id bigint,
               dead_letter_queue_name text, inserted_count bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
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
        USING (SELECT unnest(p_queue_ids) AS queue_id, unnest(p_sequences) AS sequence) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence
          AND m.receive_count >= m.max_receive_count
          -- Never ready (an exhausted message is moved instead of readied), so
          -- it has no ready row to take along.
          AND NOT m.ready
          AND (m.dead_letter_queue = '' OR EXISTS (
              SELECT 1 FROM skipq.queues e, skipq.queues s
              WHERE s.id = m.queue_id AND e.tenant = s.tenant AND e.name = m.dead_letter_queue))
        RETURNING m.*
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

-- skipq.message_nack gains p_reasons (one per handle, NULL: none) and
-- records each failure. The old signature stays, passing no reasons, for
-- nodes of the previous release during a rolling upgrade (docs/DESIGN.md,
-- "Online migrations"); the next release drops it.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_nack(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
                                   p_tokens bytea[], p_reasons text[], p_server_max_receive_count integer)
RETURNS TABLE (queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
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
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_reasons) AS k(queue_id, sequence, token, reason)
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count < m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.queue_id, m.sequence, k.token::bytea AS token
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT n.queue_id, n.sequence FROM nacked n
        ON CONFLICT DO NOTHING
    )
    SELECT n.queue_id, n.sequence, n.token, NULL::bigint, false FROM nacked n;

    -- The last deliveries: their failure is recorded (and the rows locked)
    -- for message_dead_letter to carry into the dead letters. One left in
    -- place (its dead-letter queue deleted meanwhile) keeps the record.
    WITH f AS (
        UPDATE skipq.messages m
        SET tags = m.tags || jsonb_build_object('skipq.failure',
                                                skipq.failure_doc('nack', k.reason, p_now, m.receive_count)::text)
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_reasons) AS k(queue_id, sequence, token, reason)
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count >= m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.queue_id, m.sequence, k.token::bytea AS token
    )
    SELECT array_agg(f.queue_id) AS q, array_agg(f.sequence) AS s, array_agg(f.token) AS t INTO v_final
    FROM f;
    IF v_final.q IS NOT NULL THEN
        -- The last deliveries move (once: a CTE calling a volatile function is
        -- evaluated once), each matched to its handle by its message. A message
        -- left in place (its dead-letter queue deleted meanwhile) is not
        -- settled: its handle stays valid.
        RETURN QUERY
        WITH moved AS MATERIALIZED (
            SELECT x.source_queue_id, x.source_sequence, x.dead_letter_queue_id
            FROM skipq.message_dead_letter(p_now, v_final.q, v_final.s, p_server_max_receive_count) x
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
CREATE OR REPLACE FUNCTION skipq.message_nack(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
                                   p_tokens bytea[], p_server_max_receive_count integer)
RETURNS TABLE (queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM skipq.message_nack(p_now, p_queue_ids, p_sequences, p_tokens, NULL::text[],
                                                  p_server_max_receive_count);
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], text[], integer) FROM PUBLIC;

-- skipq.nack (SQL consumer API) takes the reason too. The one-argument
-- form is replaced, not overloaded: skipq.nack(h) now resolves to this
-- function with its default.
DROP FUNCTION skipq.nack(text);
-- +goose StatementBegin
CREATE FUNCTION skipq.nack(receipt_handle text, reason text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    n record;
BEGIN
    PERFORM skipq.check(octet_length(reason) IS NULL OR octet_length(reason) <= 1024,
                        'reason must be at most 1024 bytes');
    r := skipq.receipt_parse(receipt_handle);
    SELECT * INTO n FROM skipq.message_nack(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                            ARRAY[reason], skipq.limit_setting('max_receive_count', 1024));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    -- Delivered at commit ("sql" is never a node id: every node wakes its
    -- waiters). A discarded message wakes nobody.
    IF NOT n.discarded THEN
        PERFORM skipq.wake('sql', ARRAY[coalesce(n.moved_to, n.queue_id)], ARRAY[1]);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.nack(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION skipq.nack(text, text) TO skipq_consumer;

-- +goose Down
DROP FUNCTION skipq.nack(text, text);
-- +goose StatementBegin
CREATE FUNCTION skipq.nack(receipt_handle text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    n record;
BEGIN
    r := skipq.receipt_parse(receipt_handle);
    SELECT * INTO n FROM skipq.message_nack(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                            skipq.limit_setting('max_receive_count', 1024));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    -- Delivered at commit ("sql" is never a node id: every node wakes its
    -- waiters). A discarded message wakes nobody.
    IF NOT n.discarded THEN
        PERFORM skipq.wake('sql', ARRAY[coalesce(n.moved_to, n.queue_id)], ARRAY[1]);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.nack(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION skipq.nack(text) TO skipq_consumer;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_nack(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
                                   p_tokens bytea[], p_server_max_receive_count integer)
RETURNS TABLE (queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
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
            ready = true
        FROM (SELECT unnest(p_queue_ids) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count < m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.queue_id, m.sequence, k.token::bytea AS token
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT n.queue_id, n.sequence FROM nacked n
        ON CONFLICT DO NOTHING
    )
    SELECT n.queue_id, n.sequence, n.token, NULL::bigint, false FROM nacked n;

    SELECT array_agg(f.queue_id) AS q, array_agg(f.sequence) AS s, array_agg(f.token) AS t INTO v_final
    FROM (
        SELECT m.queue_id, m.sequence, k.token::bytea AS token
        FROM skipq.messages m, (SELECT unnest(p_queue_ids) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count >= m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        FOR UPDATE OF m
    ) f;
    IF v_final.q IS NOT NULL THEN
        -- The last deliveries move (once: a CTE calling a volatile function is
        -- evaluated once), each matched to its handle by its message. A message
        -- left in place (its dead-letter queue deleted meanwhile) is not
        -- settled: its handle stays valid.
        RETURN QUERY
        WITH moved AS MATERIALIZED (
            SELECT x.source_queue_id, x.source_sequence, x.dead_letter_queue_id
            FROM skipq.message_dead_letter(p_now, v_final.q, v_final.s, p_server_max_receive_count) x
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
DROP FUNCTION skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], text[], integer);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_dead_letter(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
                                          p_server_max_receive_count integer)
RETURNS TABLE (source_queue_id bigint, source_sequence bigint, tenant text, dead_letter_queue_id bigint,
               dead_letter_queue_name text, inserted_count bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
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
        USING (SELECT unnest(p_queue_ids) AS queue_id, unnest(p_sequences) AS sequence) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence
          AND m.receive_count >= m.max_receive_count
          -- Never ready (an exhausted message is moved instead of readied), so
          -- it has no ready row to take along.
          AND NOT m.ready
          AND (m.dead_letter_queue = '' OR EXISTS (
              SELECT 1 FROM skipq.queues e, skipq.queues s
              WHERE s.id = m.queue_id AND e.tenant = s.tenant AND e.name = m.dead_letter_queue))
        RETURNING m.*
    ), target AS (
        SELECT moved.*, sq.tenant, sq.name AS source_name, dq.id AS dq_id, dq.name AS dq_name,
               dq.delay_seconds AS dq_delay_seconds, dq.expiration_seconds AS dq_expiration_seconds,
               dq.max_receive_count AS dq_max_receive_count, dq.dead_letter_queue AS dq_dead_letter_queue, dq.fifo AS dq_fifo,
               row_number() OVER (PARTITION BY dq.id, moved.message_id ORDER BY moved.sequence) AS id_rank
        FROM moved
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
               target.client_id, target.metadata, target.body, target.body_binary, target.tags,
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
DROP FUNCTION skipq.failure_doc(text, text, timestamptz, integer);
