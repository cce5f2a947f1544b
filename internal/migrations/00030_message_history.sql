-- +goose Up
-- Message history (SPEC §16.5): a queue with a row in skipq.queue_trace
-- traces the messages sent to it; every change to a traced message adds a
-- row to skipq.message_events in the statement that makes it.
--
-- A traced message carries its trace id in its tags under the reserved key
-- "skipq.trace" (set once, at send, by skipq.message_insert, from
-- skipq.trace_sequence: a bigint keeps the events' primary key small and its
-- inserts near its recent end). Moves copy tags, so the history of a dead
-- letter, a requeued or a redriven message goes on in its new queue under
-- the same trace id, traced or not: tracing follows the message, and the
-- statements only look at the rows they already return. An untraced
-- message costs each statement a test of a key in tags of the rows it
-- changed, and no write.
-- No column is added to skipq.messages or skipq.queues, and no foreign key
-- refers to them (DESIGN.md, online migrations): both tables are new.
CREATE TABLE skipq.queue_trace (
    queue_id bigint PRIMARY KEY
);

-- One row per event. id orders a trace's events: each is written under the
-- message's row lock, so two of one message cannot be drawn out of order.
-- queue_id/message_id are where it happened (a redrive changes the id);
-- gone_at is set on the event after which the message no longer exists
-- (acked and not retained, expired, deleted, discarded; a retained one's
-- acked event gets it when its retention ends): the worker removes a trace
-- 24 h after it (MessageEventsPrune, message_events_gone_idx).
CREATE SEQUENCE skipq.trace_sequence AS bigint;

CREATE TABLE skipq.message_events (
    trace_id   bigint      NOT NULL,
    id         bigint      GENERATED ALWAYS AS IDENTITY,
    queue_id   bigint      NOT NULL,
    message_id text        NOT NULL,
    type       text        NOT NULL,
    at         timestamptz NOT NULL,
    key_id     bigint,
    -- The fields of its type: receiveCount, visibleUntil, reason, cause,
    -- toQueue, newMessageId.
    detail     jsonb,
    gone_at    timestamptz,
    PRIMARY KEY (trace_id, id)
);
-- GET …/messages/{id}/history of a message that is gone from a queue: one
-- entry per message and queue, on the event after which it left it (the
-- lookup, MessageTraceOf, repeats this predicate). A message still there is
-- found by its row's tag, so the other events need no entry: a trace costs
-- its events' heap rows, their primary-key entries and about two more.
CREATE INDEX message_events_left_idx ON skipq.message_events (queue_id, message_id)
    WHERE gone_at IS NOT NULL OR type IN ('dead_lettered', 'requeued', 'redriven');
CREATE INDEX message_events_gone_idx ON skipq.message_events (gone_at) WHERE gone_at IS NOT NULL;

-- The functions that return the rows they changed get their events from a
-- wrapper under their name, which passes the change on to the function as
-- it was (renamed *_untraced) and records an event for each returned row
-- that carries a trace id, in the same statement. A new trailing parameter
-- (DEFAULT NULL) names the API key of the request (per receipt handle or
-- per message where a statement serves several requests); callers of the
-- previous release, and the SQL API, call them without it.
ALTER FUNCTION skipq.message_insert(text, text, timestamptz, integer, text[], boolean[], text[], text[], boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea, text[], text[]) RENAME TO message_insert_untraced;
-- +goose StatementBegin
CREATE FUNCTION skipq.message_insert(
    p_tenant text, p_queue text, p_now timestamptz, p_server_max_receive_count integer,
    p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[],
    p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[],
    p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[],
    p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea,
    p_group_ids text[] DEFAULT NULL, p_dedup_ids text[] DEFAULT NULL, p_key_ids bigint[] DEFAULT NULL)
RETURNS TABLE(pos integer, queue_id bigint, message_id text, sequence bigint, sent_at timestamptz,
              delayed_to timestamptz, expires_at timestamptz, outcome text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_trace bigint[];
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM skipq.queues q JOIN skipq.queue_trace t ON t.queue_id = q.id
                   WHERE q.tenant = p_tenant AND q.name = p_queue) THEN
        RETURN QUERY SELECT * FROM skipq.message_insert_untraced(p_tenant, p_queue, p_now, p_server_max_receive_count, p_message_ids, p_keyed, p_client_ids, p_metadatas, p_body_binaries, p_tags, p_delay_seconds, p_expiration_seconds, p_max_receive_counts, p_dead_letter_queues, p_dead_letter_queue_given, p_body_offsets, p_body_lengths, p_body_data, p_group_ids, p_dedup_ids);
        RETURN;
    END IF;
    -- A traced queue: each message gets a trace id in its tags, and its
    -- first event. A message keyed by a client messageId gets the id after
    -- it is stored, as its content hash covers its tags and a resend must
    -- stay a duplicate; the others carry it from the insert (no second
    -- write).
    v_trace := ARRAY(SELECT nextval('skipq.trace_sequence') FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    p_tags := ARRAY(SELECT CASE WHEN p_keyed[x] THEN p_tags[x]
                                ELSE (p_tags[x]::jsonb || jsonb_build_object('skipq.trace', v_trace[x]::text))::text END
                    FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    SELECT array_agg(x.pos) AS pos, array_agg(x.queue_id) AS queue_id, array_agg(x.message_id) AS message_id,
           array_agg(x.sequence) AS sequence, array_agg(x.sent_at) AS sent_at,
           array_agg(x.delayed_to) AS delayed_to, array_agg(x.expires_at) AS expires_at,
           array_agg(x.outcome) AS outcome INTO r
    FROM skipq.message_insert_untraced(p_tenant, p_queue, p_now, p_server_max_receive_count, p_message_ids, p_keyed, p_client_ids, p_metadatas, p_body_binaries, p_tags, p_delay_seconds, p_expiration_seconds, p_max_receive_counts, p_dead_letter_queues, p_dead_letter_queue_given, p_body_offsets, p_body_lengths, p_body_data, p_group_ids, p_dedup_ids) x;
    WITH keyed AS (
        UPDATE skipq.messages m SET tags = m.tags || jsonb_build_object('skipq.trace', v_trace[s.pos]::text)
        FROM unnest(r.pos, r.queue_id, r.sequence, r.outcome) AS s(pos, queue_id, sequence, outcome)
        WHERE s.outcome = 'sent' AND p_keyed[s.pos] AND m.queue_id = s.queue_id AND m.sequence = s.sequence
    )
    INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id)
    SELECT v_trace[s.pos], s.queue_id, s.message_id, 'sent', v_now, p_key_ids[s.pos]
    FROM unnest(r.pos, r.queue_id, r.message_id, r.sequence, r.outcome) AS s(pos, queue_id, message_id, sequence, outcome)
    WHERE s.outcome = 'sent' ORDER BY s.sequence;
    RETURN QUERY SELECT * FROM unnest(r.pos, r.queue_id, r.message_id, r.sequence, r.sent_at, r.delayed_to,
                                      r.expires_at, r.outcome);
END $$;
-- +goose StatementEnd
ALTER FUNCTION skipq.message_claim(text, text, timestamptz, integer, integer, bigint, bigint) RENAME TO message_claim_untraced;
-- +goose StatementBegin
CREATE FUNCTION skipq.message_claim(p_tenant text, p_queue text, p_now timestamptz, p_visibility_seconds integer, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint, p_key_id bigint DEFAULT NULL)
RETURNS SETOF skipq.messages LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH r AS (
        SELECT * FROM skipq.message_claim_untraced(p_tenant, p_queue, p_now, p_visibility_seconds, p_max_messages, p_max_response_bytes, p_message_overhead)
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'received', coalesce(p_now, clock_timestamp()), p_key_id,
               jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at), NULL
        FROM r WHERE r.tags ? 'skipq.trace'
    )
    SELECT * FROM r;
END $$;
-- +goose StatementEnd
ALTER FUNCTION skipq.message_claim_and_delete(text, text, timestamptz, integer, bigint, bigint) RENAME TO message_claim_and_delete_untraced;
-- +goose StatementBegin
CREATE FUNCTION skipq.message_claim_and_delete(p_tenant text, p_queue text, p_now timestamptz, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint, p_key_id bigint DEFAULT NULL)
RETURNS SETOF skipq.messages LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH r AS (
        SELECT * FROM skipq.message_claim_and_delete_untraced(p_tenant, p_queue, p_now, p_max_messages, p_max_response_bytes, p_message_overhead)
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, coalesce(p_now, clock_timestamp()),
               p_key_id, CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
               CASE WHEN e.n = 2 AND NOT EXISTS (SELECT 1 FROM skipq.queue_retention x WHERE x.queue_id = r.queue_id)
                    THEN coalesce(p_now, clock_timestamp()) END
        FROM r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
        WHERE r.tags ? 'skipq.trace'
        ORDER BY r.sequence, e.n
    )
    SELECT * FROM r;
END $$;
-- +goose StatementEnd
ALTER FUNCTION skipq.message_claim_grouped(text, text, timestamptz, integer, integer, integer, bigint, bigint, text) RENAME TO message_claim_grouped_untraced;
-- +goose StatementBegin
CREATE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamptz, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint DEFAULT NULL)
RETURNS SETOF skipq.messages LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_mode = 'peek' THEN
        RETURN QUERY SELECT * FROM skipq.message_claim_grouped_untraced(p_tenant, p_queue, p_now, p_visibility_seconds, p_max_messages, p_max_per_group, p_max_response_bytes, p_message_overhead, p_mode);
        RETURN;
    END IF;
    RETURN QUERY
    WITH r AS (
        SELECT * FROM skipq.message_claim_grouped_untraced(p_tenant, p_queue, p_now, p_visibility_seconds, p_max_messages, p_max_per_group, p_max_response_bytes, p_message_overhead, p_mode)
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, coalesce(p_now, clock_timestamp()),
               p_key_id, CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
               CASE WHEN e.n = 2 AND NOT EXISTS (SELECT 1 FROM skipq.queue_retention x WHERE x.queue_id = r.queue_id)
                    THEN coalesce(p_now, clock_timestamp()) END
        FROM r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
        WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
        ORDER BY r.sequence, e.n
    )
    SELECT * FROM r;
END $$;
-- +goose StatementEnd
ALTER FUNCTION skipq.message_ack(bigint[], bigint[], bytea[]) RENAME TO message_ack_untraced;
-- +goose StatementBegin
CREATE FUNCTION skipq.message_ack(
    p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_key_ids bigint[] DEFAULT NULL,
    p_now timestamptz DEFAULT NULL)
RETURNS SETOF skipq.messages LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH r AS (
        SELECT * FROM skipq.message_ack_untraced(p_queue_ids, p_sequences, p_tokens)
    ), keys AS (
        -- Each handle's API key by its message's sequence (unique across
        -- queues); read, and so built, only for traced rows.
        SELECT jsonb_object_agg(u.s::text, u.k) AS map
        FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
    ), traced AS (
        -- A retained message is gone when its retention ends (MessageDeleteExpired).
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'acked', coalesce(p_now, now()), (SELECT (k.map->>r.sequence::text)::bigint FROM keys k),
               NULL, CASE WHEN NOT EXISTS (SELECT 1 FROM skipq.queue_retention x WHERE x.queue_id = r.queue_id) THEN coalesce(p_now, now()) END
        FROM r WHERE r.tags ? 'skipq.trace'
    )
    SELECT * FROM r;
END $$;
-- +goose StatementEnd
ALTER FUNCTION skipq.message_set_visibility(timestamptz, bigint[], bigint[], bytea[], integer[]) RENAME TO message_set_visibility_untraced;
-- +goose StatementBegin
CREATE FUNCTION skipq.message_set_visibility(
    p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_visibility_seconds integer[],
    p_key_ids bigint[] DEFAULT NULL)
RETURNS SETOF skipq.messages LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH r AS (
        SELECT * FROM skipq.message_set_visibility_untraced(p_now, p_queue_ids, p_sequences, p_tokens, p_visibility_seconds)
    ), keys AS (
        -- Each handle's API key by its message's sequence (unique across
        -- queues); read, and so built, only for traced rows.
        SELECT jsonb_object_agg(u.s::text, u.k) AS map
        FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'extended', coalesce(p_now, now()), (SELECT (k.map->>r.sequence::text)::bigint FROM keys k),
               jsonb_build_object('visibleUntil', r.visible_at), NULL
        FROM r WHERE r.tags ? 'skipq.trace'
    )
    SELECT * FROM r;
END $$;
-- +goose StatementEnd
-- The moves and the nack return no message rows; their events are written
-- inside them, beside the statements that change the rows. Same bodies as
-- before (migration 00023, 00016) plus the events and the key parameter.
DROP FUNCTION skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], text[], integer);
-- +goose StatementBegin
CREATE FUNCTION skipq.message_nack(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_reasons text[], p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[])
 RETURNS TABLE(queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_reasons, p_key_ids)
             AS k(queue_id, sequence, token, reason, key_id)
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count < m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.queue_id, m.sequence, k.token::bytea AS token, m.message_id, m.tags, k.reason, k.key_id
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT n.queue_id, n.sequence FROM nacked n
        ON CONFLICT DO NOTHING
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
        SELECT (n.tags->>'skipq.trace')::bigint, n.queue_id, n.message_id, 'nacked', p_now, n.key_id,
               jsonb_build_object('reason', n.reason)
        FROM nacked n WHERE n.tags ? 'skipq.trace'
    )
    SELECT n.queue_id, n.sequence, n.token, NULL::bigint, false FROM nacked n;

    -- The last deliveries: their failure is recorded (and the rows locked)
    -- for message_dead_letter to carry into the dead letters. One left in
    -- place (its dead-letter queue deleted meanwhile) keeps the record.
    WITH f AS (
        UPDATE skipq.messages m
        SET tags = m.tags || jsonb_build_object('skipq.failure',
                                                skipq.failure_doc('nack', k.reason, p_now, m.receive_count)::text)
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_reasons, p_key_ids)
             AS k(queue_id, sequence, token, reason, key_id)
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.receive_count >= m.max_receive_count
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.queue_id, m.sequence, k.token::bytea AS token, m.message_id, m.tags, k.reason, k.key_id
    ), traced AS (
        -- Before message_dead_letter records the move: history in order.
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
        SELECT (f.tags->>'skipq.trace')::bigint, f.queue_id, f.message_id, 'nacked', p_now, f.key_id,
               jsonb_build_object('reason', f.reason)
        FROM f WHERE f.tags ? 'skipq.trace'
    )
    SELECT array_agg(f.queue_id) AS q, array_agg(f.sequence) AS s, array_agg(f.token) AS t,
           array_agg(f.key_id) AS k INTO v_final
    FROM f;
    IF v_final.q IS NOT NULL THEN
        -- The last deliveries move (once: a CTE calling a volatile function is
        -- evaluated once), each matched to its handle by its message. A message
        -- left in place (its dead-letter queue deleted meanwhile) is not
        -- settled: its handle stays valid.
        RETURN QUERY
        WITH moved AS MATERIALIZED (
            SELECT x.source_queue_id, x.source_sequence, x.dead_letter_queue_id
            FROM skipq.message_dead_letter(p_now, v_final.q, v_final.s, p_server_max_receive_count, v_final.k) x
        )
        SELECT k.queue_id, k.sequence, k.token, mv.dead_letter_queue_id, mv.dead_letter_queue_id IS NULL
        FROM unnest(v_final.q, v_final.s, v_final.t) AS k(queue_id, sequence, token)
        JOIN moved mv ON mv.source_queue_id = k.queue_id AND mv.source_sequence = k.sequence;
    END IF;
    -- Last, after every message lock: the groups of the nacked messages.
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $function$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_dead_letter(timestamptz, bigint[], bigint[], integer);
-- +goose StatementBegin
CREATE FUNCTION skipq.message_dead_letter(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[])
 RETURNS TABLE(source_queue_id bigint, source_sequence bigint, tenant text, dead_letter_queue_id bigint, dead_letter_queue_name text, inserted_count bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
        USING (SELECT unnest(p_queue_ids) AS queue_id, unnest(p_sequences) AS sequence,
                      unnest(p_key_ids) AS key_id) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence
          AND m.receive_count >= m.max_receive_count
          -- Never ready (an exhausted message is moved instead of readied), so
          -- it has no ready row to take along.
          AND NOT m.ready
          AND (m.dead_letter_queue = '' OR EXISTS (
              SELECT 1 FROM skipq.queues e, skipq.queues s
              WHERE s.id = m.queue_id AND e.tenant = s.tenant AND e.name = m.dead_letter_queue))
        RETURNING m.*, k.key_id
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
    ), traced AS (
        -- Recorded in the queue it leaves; the dead letter keeps its trace
        -- (tags), so its history goes on in the dead-letter queue. Without
        -- one, the message is gone.
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (target.tags->>'skipq.trace')::bigint, target.queue_id, target.message_id, 'dead_lettered', p_now,
               target.key_id,
               jsonb_build_object('toQueue', target.dq_name, 'cause', target.failure->'cause',
                                  'reason', target.failure->'reason'),
               CASE WHEN target.dq_id IS NULL THEN p_now END
        FROM target WHERE target.tags ? 'skipq.trace'
    )
    SELECT target.queue_id AS source_queue_id, target.sequence AS source_sequence, target.tenant,
           target.dq_id AS dead_letter_queue_id,
           target.dq_name AS dead_letter_queue_name,
           (SELECT count(*) FROM inserted)::bigint AS inserted_count
    FROM target;
    IF v_e.sq IS NOT NULL THEN
        PERFORM skipq.group_release(v_e.sq, v_e.sg);
    END IF;
END $function$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_requeue(timestamptz, bigint[], bigint[], bytea[], text, integer);
-- +goose StatementBegin
CREATE FUNCTION skipq.message_requeue(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_to_queue text, p_server_max_receive_count integer, p_key_ids bigint[] DEFAULT NULL::bigint[])
 RETURNS TABLE(source_queue_id bigint, source_sequence bigint, source_token bytea, destination_queue_id bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_dest   bigint;
    v_fifo   boolean;
    v_keys   record;
    v_gq     bigint[];
    v_gg     text[];
BEGIN
    p_now := coalesce(p_now, now());
    FOR v_tenant IN
        SELECT DISTINCT sq.tenant FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = u.id) sq
    LOOP
        -- A missing destination is created with its sources' type.
        INSERT INTO skipq.queues (tenant, name, fifo)
        SELECT v_tenant, p_to_queue, bool_or(x.fifo)
        FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.fifo FROM skipq.queues q WHERE q.id = u.id AND q.tenant = v_tenant) x
        WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = v_tenant AND e.name = p_to_queue)
        HAVING count(*) > 0
        ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;
        SELECT d.id, d.fifo INTO v_dest, v_fifo FROM skipq.queues d WHERE d.tenant = v_tenant AND d.name = p_to_queue;
        CONTINUE WHEN v_dest IS NULL; -- deleted meanwhile: these deliveries stay as they are
        SELECT array_agg(k.q) AS q, array_agg(k.s) AS s, array_agg(k.t) AS t, array_agg(k.k) AS k,
               bool_or(x.fifo IS DISTINCT FROM v_fifo) AS mismatch INTO v_keys
        FROM unnest(p_queue_ids, p_sequences, p_tokens, p_key_ids) AS k(q, s, t, k)
        CROSS JOIN LATERAL (SELECT x.fifo FROM skipq.queues x WHERE x.id = k.q AND x.tenant = v_tenant) x;
        -- A group's order means nothing in a standard queue, and a standard
        -- queue's message has no group.
        IF v_keys.mismatch THEN
            RAISE EXCEPTION 'skipq: queue_type_mismatch' USING ERRCODE = 'SQ409',
                DETAIL = format('queue %L is %s', p_to_queue, CASE WHEN v_fifo THEN 'FIFO' ELSE 'not FIFO' END);
        END IF;
        v_gq := NULL;
        v_gg := NULL;
        IF v_fifo THEN
            -- The groups the messages leave and join (the same names),
            -- entered before the move.
            SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
            FROM unnest(v_keys.q, v_keys.s, v_keys.t) AS k(q, s, t)
            CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                                WHERE m.queue_id = k.q AND m.sequence = k.s AND m.lease_token = k.t) m;
            IF v_gq IS NOT NULL THEN
                PERFORM skipq.group_enter(array_fill(v_dest, ARRAY[cardinality(v_gg)]), v_gg);
            END IF;
        END IF;
        RETURN QUERY
        WITH moved AS (
            DELETE FROM skipq.messages m
            USING (SELECT unnest(v_keys.q) AS queue_id, unnest(v_keys.s) AS sequence,
                    unnest(v_keys.t) AS token, unnest(v_keys.k) AS key_id) k
            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
              AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
            RETURNING m.*, k.key_id
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
                sent_at, visible_at, expires_at, max_receive_count, dead_letter_queue, re_routed_from, ready,
                group_id)
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
                   true,
                   source.group_id
            FROM source, dq, t
            RETURNING queue_id, sequence
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT n.queue_id, n.sequence FROM inserted n
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
            SELECT (moved.tags->>'skipq.trace')::bigint, moved.queue_id, moved.message_id, 'requeued', p_now,
                   moved.key_id, jsonb_build_object('toQueue', p_to_queue)
            FROM moved WHERE moved.tags ? 'skipq.trace'
        )
        SELECT moved.queue_id, moved.sequence, moved.lease_token, v_dest
        FROM moved;
        IF v_fifo AND v_gq IS NOT NULL THEN
            PERFORM skipq.group_release(v_gq, v_gg);
        END IF;
    END LOOP;
END $function$;
-- +goose StatementEnd
-- Contract step of migrations 00023 and 00029 (DESIGN.md, online migrations
-- rule 1): the signatures they kept for the nodes of the release before
-- them, which no running node calls any more (the previous release calls
-- message_nack with reasons and the search walk with a group).
DROP FUNCTION skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], integer);
DROP FUNCTION skipq.message_search_walk(bigint[], text[], jsonb, timestamptz, timestamptz, timestamptz, text,
                                        bigint, bigint, bigint, timestamptz);
-- New functions are executable by PUBLIC unless revoked (migration 00006).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION skipq.message_nack(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_server_max_receive_count integer)
 RETURNS TABLE(queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY SELECT * FROM skipq.message_nack(p_now, p_queue_ids, p_sequences, p_tokens, NULL::text[],
                                                  p_server_max_receive_count);
END $function$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION skipq.message_search_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_scan_per_queue bigint, p_max_matches bigint, p_now timestamp with time zone)
 RETURNS TABLE(queue_id bigint, queue_name text, sequence bigint, sent_at timestamp with time zone, matched boolean, state text, size bigint, exhausted boolean)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    q record;
    m record;
    v_read bigint;
    v_found bigint;
BEGIN
    FOR q IN SELECT z.id, z.name FROM skipq.queues z WHERE z.id = ANY(p_queue_ids) LOOP
        v_read := 0;
        v_found := 0;
        FOR m IN
            SELECT x.sequence, x.sent_at, s.state,
                   skipq.message_wire_size(x.body, x.body_binary, x.metadata, x.tags, x.message_id,
                       x.client_id, x.re_routed_from) + octet_length(q.name) AS size,
                   (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                   AND x.tags @> p_tags
                   AND (x.expires_at IS NULL OR x.expires_at > v_now) AS ok
            FROM skipq.messages x
            CROSS JOIN LATERAL (SELECT skipq.message_search_state(x.dead_lettered_at, x.visible_at,
                x.receive_count, x.max_receive_count, x.lease_token, v_now) AS state) s
            WHERE x.queue_id = q.id
              AND x.sent_at >= coalesce(p_sent_after, '-infinity')
              AND x.sent_at < coalesce(p_sent_before, 'infinity')
              AND x.sent_at <= coalesce(p_after_sent_at, 'infinity')
              AND (p_after_sent_at IS NULL OR x.sent_at < p_after_sent_at
                   OR (q.name, x.sequence) > (p_after_queue, p_after_sequence))
            ORDER BY x.sent_at DESC, x.sequence
            LIMIT p_scan_per_queue
        LOOP
            v_read := v_read + 1;
            queue_id := q.id; queue_name := q.name; sequence := m.sequence; sent_at := m.sent_at;
            state := m.state; size := m.size;
            IF m.ok THEN
                matched := true; exhausted := false;
                RETURN NEXT;
                v_found := v_found + 1;
                EXIT WHEN v_found >= p_max_matches;
            END IF;
            IF v_read = p_scan_per_queue THEN
                matched := false; exhausted := true;
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;
END
$function$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_requeue(timestamptz, bigint[], bigint[], bytea[], text, integer, bigint[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_requeue(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_to_queue text, p_server_max_receive_count integer)
 RETURNS TABLE(source_queue_id bigint, source_sequence bigint, source_token bytea, destination_queue_id bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_dest   bigint;
    v_fifo   boolean;
    v_keys   record;
    v_gq     bigint[];
    v_gg     text[];
BEGIN
    p_now := coalesce(p_now, now());
    FOR v_tenant IN
        SELECT DISTINCT sq.tenant FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.tenant FROM skipq.queues q WHERE q.id = u.id) sq
    LOOP
        -- A missing destination is created with its sources' type.
        INSERT INTO skipq.queues (tenant, name, fifo)
        SELECT v_tenant, p_to_queue, bool_or(x.fifo)
        FROM unnest(p_queue_ids) AS u(id)
        CROSS JOIN LATERAL (SELECT q.fifo FROM skipq.queues q WHERE q.id = u.id AND q.tenant = v_tenant) x
        WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = v_tenant AND e.name = p_to_queue)
        HAVING count(*) > 0
        ON CONFLICT ON CONSTRAINT queues_tenant_name_key DO NOTHING;
        SELECT d.id, d.fifo INTO v_dest, v_fifo FROM skipq.queues d WHERE d.tenant = v_tenant AND d.name = p_to_queue;
        CONTINUE WHEN v_dest IS NULL; -- deleted meanwhile: these deliveries stay as they are
        SELECT array_agg(k.q) AS q, array_agg(k.s) AS s, array_agg(k.t) AS t,
               bool_or(x.fifo IS DISTINCT FROM v_fifo) AS mismatch INTO v_keys
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(q, s, t)
        CROSS JOIN LATERAL (SELECT x.fifo FROM skipq.queues x WHERE x.id = k.q AND x.tenant = v_tenant) x;
        -- A group's order means nothing in a standard queue, and a standard
        -- queue's message has no group.
        IF v_keys.mismatch THEN
            RAISE EXCEPTION 'skipq: queue_type_mismatch' USING ERRCODE = 'SQ409',
                DETAIL = format('queue %L is %s', p_to_queue, CASE WHEN v_fifo THEN 'FIFO' ELSE 'not FIFO' END);
        END IF;
        v_gq := NULL;
        v_gg := NULL;
        IF v_fifo THEN
            -- The groups the messages leave and join (the same names),
            -- entered before the move.
            SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
            FROM unnest(v_keys.q, v_keys.s, v_keys.t) AS k(q, s, t)
            CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                                WHERE m.queue_id = k.q AND m.sequence = k.s AND m.lease_token = k.t) m;
            IF v_gq IS NOT NULL THEN
                PERFORM skipq.group_enter(array_fill(v_dest, ARRAY[cardinality(v_gg)]), v_gg);
            END IF;
        END IF;
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
                sent_at, visible_at, expires_at, max_receive_count, dead_letter_queue, re_routed_from, ready,
                group_id)
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
                   true,
                   source.group_id
            FROM source, dq, t
            RETURNING queue_id, sequence
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT n.queue_id, n.sequence FROM inserted n
        )
        SELECT moved.queue_id, moved.sequence, moved.lease_token, v_dest
        FROM moved;
        IF v_fifo AND v_gq IS NOT NULL THEN
            PERFORM skipq.group_release(v_gq, v_gg);
        END IF;
    END LOOP;
END $function$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_dead_letter(timestamptz, bigint[], bigint[], integer, bigint[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_dead_letter(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_server_max_receive_count integer)
 RETURNS TABLE(source_queue_id bigint, source_sequence bigint, tenant text, dead_letter_queue_id bigint, dead_letter_queue_name text, inserted_count bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
END $function$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], text[], integer, bigint[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_nack(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_reasons text[], p_server_max_receive_count integer)
 RETURNS TABLE(queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
END $function$;
-- +goose StatementEnd
DROP FUNCTION skipq.message_insert(text, text, timestamptz, integer, text[], boolean[], text[], text[], boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea, text[], text[], bigint[]);
ALTER FUNCTION skipq.message_insert_untraced(text, text, timestamptz, integer, text[], boolean[], text[], text[], boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea, text[], text[]) RENAME TO message_insert;
DROP FUNCTION skipq.message_claim(text, text, timestamptz, integer, integer, bigint, bigint, bigint);
ALTER FUNCTION skipq.message_claim_untraced(text, text, timestamptz, integer, integer, bigint, bigint) RENAME TO message_claim;
DROP FUNCTION skipq.message_claim_and_delete(text, text, timestamptz, integer, bigint, bigint, bigint);
ALTER FUNCTION skipq.message_claim_and_delete_untraced(text, text, timestamptz, integer, bigint, bigint) RENAME TO message_claim_and_delete;
DROP FUNCTION skipq.message_claim_grouped(text, text, timestamptz, integer, integer, integer, bigint, bigint, text, bigint);
ALTER FUNCTION skipq.message_claim_grouped_untraced(text, text, timestamptz, integer, integer, integer, bigint, bigint, text) RENAME TO message_claim_grouped;
DROP FUNCTION skipq.message_ack(bigint[], bigint[], bytea[], bigint[], timestamptz);
ALTER FUNCTION skipq.message_ack_untraced(bigint[], bigint[], bytea[]) RENAME TO message_ack;
DROP FUNCTION skipq.message_set_visibility(timestamptz, bigint[], bigint[], bytea[], integer[], bigint[]);
ALTER FUNCTION skipq.message_set_visibility_untraced(timestamptz, bigint[], bigint[], bytea[], integer[]) RENAME TO message_set_visibility;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC;
DROP TABLE skipq.message_events;
DROP SEQUENCE skipq.trace_sequence;
DROP TABLE skipq.queue_trace;
