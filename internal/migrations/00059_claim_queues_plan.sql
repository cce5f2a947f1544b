-- +goose Up
-- skipq.message_claim_queues, the node's claim of several queues in one
-- statement, becomes PL/pgSQL: as a SQL function with SET clauses it was
-- never inlined, and its query was planned on every call, about 1 M
-- instructions (callgrind, docs/PERFORMANCE.md: a call for ten queues
-- 7.89 M -> 6.87 M, for one 2.20 M -> 1.20 M). The same query under the
-- same settings, its plan now generic and kept for the session.
--
-- Same signature. The Down restores the SQL function.
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_queues(p_now timestamp with time zone, p_tenants text[], p_queues text[], p_max_messages integer[], p_visibility_seconds integer[], p_key_ids bigint[], p_max_response_bytes bigint[], p_message_overheads bigint[]) RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text, body bytea, body_binary boolean, tags jsonb, sent_at timestamp with time zone, visible_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, receive_count integer, first_received_at timestamp with time zone, max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamp with time zone, lease_token bytea, ready boolean, group_id text)
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
    -- Claim i takes up to p_max_messages[i] of queue p_queues[i] as
    -- skipq.message_claim does (at most one message of a FIFO group),
    -- under p_key_ids[i]; rows in claim order, each claim's in answer
    -- order. A topic copy comes with its stored body in place of its
    -- empty one and without the tag that named it (one primary-key probe
    -- of skipq.topic_bodies: the settings keep the planner from joining
    -- the whole table); a copy whose body is gone keeps both.
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
    ORDER BY k.claim, m.ordinality
$$;
-- +goose StatementEnd
