-- +goose Up
-- Search across queues (SPEC §16.2). First, two expressions written once
-- for the queries that need them, as IMMUTABLE SQL functions the planner inlines (no call per row; like message_state,
-- they pin no search_path, which would stop the inlining, and run with
-- their caller's rights).

-- message_wire_size: what a message adds to a response without its queue's
-- name (the response budget, SKIPQ_MAX_RESPONSE_BYTES): the body as sent
-- (base64 grows it by 4/3), metadata, tags as JSON text, ids. Measured from
-- the row without fetching the body's bytes (octet_length reads the
-- varlena header).
CREATE FUNCTION skipq.message_wire_size(
    p_body bytea, p_body_binary boolean, p_metadata text, p_tags jsonb,
    p_message_id text, p_client_id text, p_re_routed_from text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_body_binary THEN (octet_length(p_body)::bigint + 2) / 3 * 4
                ELSE octet_length(p_body)::bigint END
           + octet_length(p_metadata) + octet_length(p_tags::text) + octet_length(p_message_id)
           + octet_length(p_client_id) + coalesce(octet_length(p_re_routed_from), 0)
$$;
REVOKE ALL ON FUNCTION skipq.message_wire_size(bytea, boolean, text, jsonb, text, text, text) FROM PUBLIC;

-- message_search_state: a message's state as search reports and filters it
-- (SPEC §16.2): message_state's, except that a message sitting in a queue
-- because it was dead-lettered there, not yet received from it, is
-- dead_lettered. Exclusive like message_state's.
CREATE FUNCTION skipq.message_search_state(
    p_dead_lettered_at timestamptz, p_visible_at timestamptz, p_receive_count integer,
    p_max_receive_count integer, p_lease_token bytea, p_now timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_dead_lettered_at IS NOT NULL AND p_receive_count = 0 THEN 'dead_lettered'
                ELSE skipq.message_state(p_visible_at, p_receive_count, p_max_receive_count, p_lease_token, p_now) END
$$;
REVOKE ALL ON FUNCTION skipq.message_search_state(timestamptz, timestamptz, integer, integer, bytea, timestamptz) FROM PUBLIC;

-- message_search_walk: search across queues (SPEC §16.2, GET /v1/messages),
-- first step. Walks each given queue newest first from the cursor by
-- messages_queue_sent_idx (sent_at descending, then queue name, then
-- sequence ascending: within a queue the name is fixed, so the index gives
-- the order) and returns keys, not bodies:
--   - the first p_max_matches matches (the filters hold) of each queue,
--     with their state and response size;
--   - for a queue whose walk read its whole budget (p_scan_per_queue index
--     entries) before finding that many, the last entry it read, with
--     exhausted set (matched false): the queue's entries past it were not
--     looked at, so the caller cuts the page there.
-- The loop stops reading a queue as soon as its matches are complete, so a
-- request reads about a page per queue when matches are common and at most
-- p_scan_per_queue entries per queue when they are rare.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_search_walk(
    p_queue_ids bigint[], p_states text[], p_tags jsonb,
    p_sent_after timestamptz, p_sent_before timestamptz,
    p_after_sent_at timestamptz, p_after_queue text, p_after_sequence bigint,
    p_scan_per_queue bigint, p_max_matches bigint, p_now timestamptz)
RETURNS TABLE (queue_id bigint, queue_name text, sequence bigint, sent_at timestamptz,
               matched boolean, state text, size bigint, exhausted boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_search_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.message_search_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz);
DROP FUNCTION skipq.message_search_state(timestamptz, timestamptz, integer, integer, bytea, timestamptz);
DROP FUNCTION skipq.message_wire_size(bytea, boolean, text, jsonb, text, text, text);
