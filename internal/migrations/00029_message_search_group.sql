-- +goose Up
-- Search's groupId filter (SPEC §16.2: exact, FIFO queues). A new overload
-- of skipq.message_search_walk with p_group_id: nodes of the previous
-- release keep calling the one without it (dropped a release later,
-- DESIGN.md "Online migrations"). With a group, each queue's candidates
-- come from messages_group_idx (one descent to the group's entries)
-- instead of messages_queue_sent_idx: that index is in sequence order, not
-- the search's, so the group's entries past the cursor are read and sorted
-- (a top-N sort, at most p_scan_per_queue kept), and a page costs about
-- the group's size rather than a queue's.
--
-- And a cut that 00022's walk lacks: once the queues walked so far hold
-- p_max_matches matches, an entry older than the p_max_matches-th newest
-- of them cannot be on the page (the caller keeps the first p_max_matches
-- in search order), so the queues after stop there, in the index
-- condition. Messages spread over many queues then cost about a page in
-- all instead of a page per queue. Everything else -- the budget, the
-- exhausted mark, the columns -- is the walk of 00022.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_search_walk(
    p_queue_ids bigint[], p_states text[], p_tags jsonb,
    p_sent_after timestamptz, p_sent_before timestamptz,
    p_after_sent_at timestamptz, p_after_queue text, p_after_sequence bigint,
    p_scan_per_queue bigint, p_max_matches bigint, p_now timestamptz, p_group_id text)
RETURNS TABLE (queue_id bigint, queue_name text, sequence bigint, sent_at timestamptz,
               matched boolean, state text, size bigint, exhausted boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- One plan per statement for every queue and call: a custom plan per
-- queue costs more than the page it reads.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    q record;
    m record;
    c refcursor;
    v_found bigint;
    -- The sentAt of the newest p_max_matches matches so far, and the
    -- oldest of them once there are that many (NULL before: no cut).
    v_times timestamptz[] := '{}';
    v_cut timestamptz;
BEGIN
    FOR q IN SELECT z.id, z.name FROM skipq.queues z WHERE z.id = ANY(p_queue_ids) LOOP
        v_found := 0;
        -- The two statements differ only in how they find the queue's
        -- candidates (x); each keeps a plan of its own. The filters run in
        -- the statement, so only matches reach this loop, and the budget's
        -- last entry (n = p_scan_per_queue) for the exhausted mark; the
        -- response size is measured for those rows only.
        IF p_group_id IS NULL THEN
            OPEN c FOR
                SELECT y.sequence, y.sent_at, y.state, y.ok, y.n,
                       skipq.message_wire_size(y.body, y.body_binary, y.metadata, y.tags, y.message_id,
                           y.client_id, y.re_routed_from) + octet_length(q.name) AS size
                FROM (
                    SELECT x.*, s.state,
                           (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                           AND x.tags @> p_tags
                           AND (x.expires_at IS NULL OR x.expires_at > v_now) AS ok,
                           row_number() OVER (ORDER BY x.sent_at DESC, x.sequence) AS n
                    FROM (
                        SELECT m.* FROM skipq.messages m
                        WHERE m.queue_id = q.id
                          AND m.sent_at >= coalesce(p_sent_after, '-infinity')
                          AND m.sent_at < coalesce(p_sent_before, 'infinity')
                          AND m.sent_at <= coalesce(p_after_sent_at, 'infinity')
                          AND m.sent_at >= coalesce(v_cut, '-infinity')
                          AND (p_after_sent_at IS NULL OR m.sent_at < p_after_sent_at
                               OR (q.name, m.sequence) > (p_after_queue, p_after_sequence))
                        ORDER BY m.sent_at DESC, m.sequence
                        LIMIT p_scan_per_queue) x
                    CROSS JOIN LATERAL (SELECT skipq.message_search_state(x.dead_lettered_at, x.visible_at,
                        x.receive_count, x.max_receive_count, x.lease_token, v_now) AS state) s
                ) y
                WHERE y.ok OR y.n = p_scan_per_queue
                ORDER BY y.sent_at DESC, y.sequence;
        ELSE
            OPEN c FOR
                SELECT y.sequence, y.sent_at, y.state, y.ok, y.n,
                       skipq.message_wire_size(y.body, y.body_binary, y.metadata, y.tags, y.message_id,
                           y.client_id, y.re_routed_from) + octet_length(q.name) AS size
                FROM (
                    SELECT x.*, s.state,
                           (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                           AND x.tags @> p_tags
                           AND (x.expires_at IS NULL OR x.expires_at > v_now) AS ok,
                           row_number() OVER (ORDER BY x.sent_at DESC, x.sequence) AS n
                    FROM (
                        SELECT m.* FROM skipq.messages m
                        WHERE (m.queue_id::text || '/' || m.group_id) = (q.id::text || '/' || p_group_id)
                          AND m.group_id IS NOT NULL
                          AND m.sent_at >= coalesce(p_sent_after, '-infinity')
                          AND m.sent_at < coalesce(p_sent_before, 'infinity')
                          AND m.sent_at <= coalesce(p_after_sent_at, 'infinity')
                          AND m.sent_at >= coalesce(v_cut, '-infinity')
                          AND (p_after_sent_at IS NULL OR m.sent_at < p_after_sent_at
                               OR (q.name, m.sequence) > (p_after_queue, p_after_sequence))
                        ORDER BY m.sent_at DESC, m.sequence
                        LIMIT p_scan_per_queue) x
                    CROSS JOIN LATERAL (SELECT skipq.message_search_state(x.dead_lettered_at, x.visible_at,
                        x.receive_count, x.max_receive_count, x.lease_token, v_now) AS state) s
                ) y
                WHERE y.ok OR y.n = p_scan_per_queue
                ORDER BY y.sent_at DESC, y.sequence;
        END IF;
        LOOP
            FETCH c INTO m;
            EXIT WHEN NOT FOUND;
            queue_id := q.id; queue_name := q.name; sequence := m.sequence; sent_at := m.sent_at;
            state := m.state; size := m.size;
            IF m.ok THEN
                matched := true; exhausted := false;
                RETURN NEXT;
                v_times := v_times || m.sent_at;
                v_found := v_found + 1;
                EXIT WHEN v_found >= p_max_matches;
            END IF;
            IF m.n = p_scan_per_queue THEN
                matched := false; exhausted := true;
                RETURN NEXT;
            END IF;
        END LOOP;
        CLOSE c;
        IF cardinality(v_times) >= p_max_matches THEN
            v_times := ARRAY(SELECT t FROM unnest(v_times) t ORDER BY t DESC LIMIT p_max_matches);
            v_cut := v_times[p_max_matches];
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_search_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz, text) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.message_search_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz, text);
