-- +goose Up
-- Requeue is written once too: skipq.message_requeue, called by the HTTP
-- API (db/settle_moves.go) and by the SQL consumer API's skipq.requeue. It
-- moves the deliveries the handles name to p_to_queue in each message's own
-- tenant (receipts carry no credentials: the tenant is the source queue's),
-- creating it when missing. One row per delivery moved, with its
-- destination queue. The move, as it was in queries/messages.sql:
-- Moves in-flight messages to @destination_queue_id as AVAILABLE now: same
-- messageId (a new server id if it is taken there), body, metadata, tags and
-- clientId, fresh delivery state, reRoutedFrom = the source queue, and the
-- destination's expiration and receive policy.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_requeue(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[],
                                      p_tokens bytea[], p_to_queue text, p_server_max_receive_count integer)
RETURNS TABLE (source_queue_id bigint, source_sequence bigint, source_token bytea, destination_queue_id bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_dest   bigint;
    v_keys   record;
BEGIN
    p_now := coalesce(p_now, now());
    FOR v_tenant IN
        SELECT DISTINCT sq.tenant FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = u.id) sq
    LOOP
        INSERT INTO skipq.queues (tenant, name)
        SELECT v_tenant, p_to_queue
        WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = v_tenant AND e.name = p_to_queue)
        ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;
        SELECT d.id INTO v_dest FROM skipq.queues d WHERE d.tenant = v_tenant AND d.name = p_to_queue;
        CONTINUE WHEN v_dest IS NULL; -- deleted meanwhile: these deliveries stay as they are
        SELECT array_agg(k.q) AS q, array_agg(k.s) AS s, array_agg(k.t) AS t INTO v_keys
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(q, s, t)
        CROSS JOIN LATERAL (SELECT 1 FROM skipq.queues x WHERE x.id = k.q AND x.tenant = v_tenant) x;
        RETURN QUERY
        WITH moved AS (
            DELETE FROM skipq.messages m
            USING (SELECT unnest(v_keys.q) AS queue_id, unnest(v_keys.s) AS sequence,
                    unnest(v_keys.t) AS token) k
            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
              AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
            RETURNING m.*
        ), unready AS (
            -- A message is ready here only if its lease ran out and the worker
            -- readied it before its holder requeued it: rare, so the plain array form
            -- (which may scan the source queue's ready rows) is good enough.
            DELETE FROM skipq.ready r
            WHERE r.queue_id = ANY(ARRAY(SELECT DISTINCT g.queue_id FROM moved g WHERE g.ready))
              AND r.sequence = ANY(ARRAY(SELECT g.sequence FROM moved g WHERE g.ready))
        ), source AS (
            SELECT moved.*, sq.name AS source_name,
                   row_number() OVER (PARTITION BY moved.message_id ORDER BY moved.sequence) AS id_rank
            FROM moved JOIN skipq.queues sq ON sq.id = moved.queue_id
        ), dq AS (
            SELECT d.* FROM skipq.queues d WHERE d.id = v_dest
        ), t AS (
            SELECT p_now AS now
        ), inserted AS (
            INSERT INTO skipq.messages (
                queue_id, message_id, client_id, metadata, body, body_binary, tags,
                sent_at, visible_at, expires_at, max_receive_count, dead_letter_queue, re_routed_from, ready)
            SELECT dq.id,
                   CASE WHEN source.id_rank > 1 OR EXISTS (
                            SELECT 1 FROM skipq.messages x
                            WHERE x.queue_id = dq.id AND x.message_id = source.message_id)
                        THEN skipq.uuid_v7()::text ELSE source.message_id END,
                   source.client_id, source.metadata, source.body, source.body_binary, source.tags,
                   source.sent_at, t.now,
                   CASE WHEN dq.expiration_seconds > 0 THEN t.now + make_interval(secs => dq.expiration_seconds) END,
                   CASE WHEN dq.max_receive_count > 0 THEN dq.max_receive_count
                        ELSE p_server_max_receive_count END,
                   dq.dead_letter_queue,
                   source.source_name,
                   true
            FROM source, dq, t
            RETURNING queue_id, sequence
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT n.queue_id, n.sequence FROM inserted n
        )
        SELECT moved.queue_id, moved.sequence, moved.lease_token, v_dest
        FROM moved;
    END LOOP;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_requeue(timestamptz, bigint[], bigint[], bytea[], text, integer) FROM PUBLIC;

-- skipq.requeue (SQL consumer API): the delivery's message moves to
-- to_queue (created if missing, in the message's tenant) as available now
-- with a fresh delivery state, when the caller's transaction commits, which
-- wakes receivers waiting on it; SQ404 when the handle settles nothing.
-- +goose StatementBegin
CREATE FUNCTION skipq.requeue(receipt_handle text, to_queue text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    m record;
BEGIN
    PERFORM skipq.check_queue_name('to_queue', to_queue);
    r := skipq.receipt_parse(receipt_handle);
    SELECT * INTO m FROM skipq.message_requeue(clock_timestamp(), ARRAY[r.queue_id], ARRAY[r.sequence],
                                               ARRAY[r.token], to_queue, skipq.limit_setting('max_receive_count', 1024));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404';
    END IF;
    PERFORM skipq.wake('sql', ARRAY[m.destination_queue_id], ARRAY[1]);
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.requeue(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION skipq.requeue(text, text) TO skipq_consumer;

-- +goose Down
DROP FUNCTION skipq.requeue(text, text);
DROP FUNCTION skipq.message_requeue(timestamptz, bigint[], bigint[], bytea[], text, integer);
