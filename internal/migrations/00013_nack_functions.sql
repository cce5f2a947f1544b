-- +goose Up
-- The moves a settle can make -- dead-lettering a last delivery, and the nack
-- that leads to it -- become functions, their SQL as it was in
-- queries/messages.sql (MessageDeadLetter, MessageNackByReceipt,
-- MessageFinalByReceipt) plus the creation of missing dead-letter queues
-- that the HTTP API did in Go: the HTTP API and the worker call them, and so
-- does the SQL consumer API's skipq.nack (below), so a nack is written
-- once. Plan settings and generic plans as in
-- migration 00011.

-- skipq.message_dead_letter moves the given messages, which the caller has
-- locked (a nack's final deliveries, the worker's expired last leases), to
-- their dead-letter queues, creating the missing ones in the source's
-- tenant, or discards those without one. One row per message moved or
-- discarded (dead_letter_queue_id NULL).
-- Moves messages that used up their deliveries, atomically in one statement:
-- each leaves its queue and enters its dead-letter queue (same tenant) with
-- the same messageId, body, metadata, tags and clientId, reRoutedFrom = the
-- source queue, deadLetteredAt set, a fresh delivery state and the
-- dead-letter queue's defaults -- or is discarded when it has no dead-letter
-- queue (dead_letter_queue_id NULL in the result). A message whose dead-letter queue does not exist is left in place
-- (never dropped): the caller creates the queues first (QueueCreateMissing).
-- A messageId already taken in the destination gets a new server id.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_dead_letter(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
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
BEGIN
    p_now := coalesce(p_now, now());
    -- Missing dead-letter queues first, in each source's tenant (concurrent
    -- creators are fine: ON CONFLICT skips the loser's row).
    INSERT INTO skipq.queues AS nq (tenant, name)
    SELECT DISTINCT s.tenant, m.dead_letter_queue
    FROM unnest(p_queue_ids, p_sequences) AS k(queue_id, sequence)
    CROSS JOIN LATERAL (SELECT * FROM skipq.messages x
                        WHERE x.queue_id = k.queue_id AND x.sequence = k.sequence) m
    CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = m.queue_id) s
    WHERE m.dead_letter_queue <> ''
      AND NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = s.tenant AND e.name = m.dead_letter_queue)
    ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;

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
               dq.max_receive_count AS dq_max_receive_count, dq.dead_letter_queue AS dq_dead_letter_queue,
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
            re_routed_from, dead_lettered_at, ready)
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
               target.dq_delay_seconds = 0
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
END $$;
-- +goose StatementEnd

-- skipq.message_nack makes the deliveries the handles name available again
-- now, and dead-letters (or discards) those that were their message's last
-- allowed delivery, in the caller's transaction. One row per delivery it
-- settled, with where the message went: its own queue (moved_to NULL,
-- discarded false), a dead-letter queue, or nowhere (discarded).
--
-- The nack:
-- Makes messages available again now: ready, with the lease cleared. A
-- message on its last allowed delivery is left alone here:
-- MessageDeadLetter moves it in the same transaction. The message row is
-- locked by the UPDATE before its ready row is written (the lock order of
-- every statement), and a message that is already ready (its lease ran out
-- and the worker readied it before this nack) keeps its one ready row.
-- The last deliveries:
-- Nack of a last allowed delivery: the messages to dead-letter, locked until
-- MessageDeadLetter moves them in the same transaction, with the dead-letter
-- queues to create first.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_nack(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
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
BEGIN
    p_now := coalesce(p_now, now());
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
    IF v_final.q IS NULL THEN
        RETURN;
    END IF;
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
END $$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION skipq.message_dead_letter(timestamptz, bigint[], bigint[], integer),
    skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], integer) FROM PUBLIC;

-- skipq.nack (SQL consumer API): the delivery's message is available again
-- now -- or, on its last allowed delivery, dead-lettered (or discarded) at
-- once -- when the caller's transaction commits, which wakes waiting
-- receivers; SQ404 when the handle settles nothing.
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

-- skipq.set_visibility now also releases (0): a nack, returning the time of
-- the release.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.set_visibility(receipt_handle text, visibility_seconds integer) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    v_until timestamptz;
BEGIN
    PERFORM skipq.check(visibility_seconds BETWEEN 0 AND 43200, 'visibility_seconds must be between 0 and 43200');
    IF visibility_seconds = 0 THEN
        v_until := clock_timestamp();
        PERFORM skipq.nack(receipt_handle);
        RETURN v_until;
    END IF;
    r := skipq.receipt_parse(receipt_handle);
    SELECT e.visible_at INTO v_until
    FROM skipq.message_set_visibility(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                      ARRAY[visibility_seconds]) e;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    RETURN v_until;
END $$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION skipq.nack(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION skipq.nack(text) TO skipq_consumer;

-- +goose Down
DROP FUNCTION skipq.nack(text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.set_visibility(receipt_handle text, visibility_seconds integer) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    v_until timestamptz;
BEGIN
    PERFORM skipq.check(visibility_seconds BETWEEN 1 AND 43200,
                        'visibility_seconds must be between 1 and 43200 (a release, 0, is not offered in SQL yet)');
    r := skipq.receipt_parse(receipt_handle);
    SELECT e.visible_at INTO v_until
    FROM skipq.message_set_visibility(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence], ARRAY[r.token],
                                      ARRAY[visibility_seconds]) e;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    RETURN v_until;
END $$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], integer);
DROP FUNCTION skipq.message_dead_letter(timestamptz, bigint[], bigint[], integer);
