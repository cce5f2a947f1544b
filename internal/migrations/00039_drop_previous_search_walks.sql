-- +goose Up
-- Search's walks before 00038's, dropped now that no node of this release
-- or the previous one calls them: the previous release already walks with
-- skipq.message_search_lifecycle_walk (00038). skipq.message_search_walk
-- (00029) and skipq.message_search_bounded_walk (00032) reported a dead
-- letter waiting in its queue as dead_lettered; skipq.message_search_state
-- was that rule, and only they used it.
DROP FUNCTION skipq.message_search_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_scan_per_queue bigint, p_max_matches bigint, p_now timestamp with time zone, p_group_id text);
DROP FUNCTION skipq.message_search_bounded_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_budget bigint, p_max_matches bigint, p_now timestamp with time zone, p_group_id text);
DROP FUNCTION skipq.message_search_state(p_dead_lettered_at timestamp with time zone, p_visible_at timestamp with time zone, p_receive_count integer, p_max_receive_count integer, p_lease_token bytea, p_now timestamp with time zone);

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_search_state(p_dead_lettered_at timestamp with time zone, p_visible_at timestamp with time zone, p_receive_count integer, p_max_receive_count integer, p_lease_token bytea, p_now timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN p_dead_lettered_at IS NOT NULL AND p_receive_count = 0 THEN 'dead_lettered'
                ELSE skipq.message_state(p_visible_at, p_receive_count, p_max_receive_count, p_lease_token, p_now) END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_search_state(p_dead_lettered_at timestamp with time zone, p_visible_at timestamp with time zone, p_receive_count integer, p_max_receive_count integer, p_lease_token bytea, p_now timestamp with time zone) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_search_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_scan_per_queue bigint, p_max_matches bigint, p_now timestamp with time zone, p_group_id text) RETURNS TABLE(queue_id bigint, queue_name text, sequence bigint, sent_at timestamp with time zone, matched boolean, state text, size bigint, exhausted boolean)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
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
REVOKE ALL ON FUNCTION skipq.message_search_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_scan_per_queue bigint, p_max_matches bigint, p_now timestamp with time zone, p_group_id text) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_search_bounded_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_budget bigint, p_max_matches bigint, p_now timestamp with time zone, p_group_id text) RETURNS TABLE(queue_id bigint, queue_name text, sequence bigint, sent_at timestamp with time zone, matched boolean, state text, size bigint, exhausted boolean)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    r record;
    c refcursor;
    -- The queues, by index: id, name, the last entry read (NULL: none yet;
    -- the next read resumes after it), whether that read stopped at its
    -- share (then that entry is the queue's walk-end mark), and whether
    -- the next round reads on.
    a_id bigint[];
    a_name text[];
    a_rt timestamptz[];
    a_rs bigint[];
    a_stopped boolean[];
    a_on boolean[];
    v_n integer;
    v_on integer;
    v_round integer := 0;
    -- The sentAt of the newest p_max_matches matches so far, and the
    -- oldest of them once there are that many (NULL before: no cut).
    v_times timestamptz[] := '{}';
    v_cut timestamptz;
    -- The entries the walk may still read; a round's share per queue.
    v_left bigint := p_budget;
    v_share bigint;
BEGIN
    SELECT array_agg(z.id), array_agg(z.name) INTO a_id, a_name
    FROM skipq.queues z WHERE z.id = ANY(p_queue_ids);
    v_n := coalesce(cardinality(a_id), 0);
    a_rt := array_fill(NULL::timestamptz, ARRAY[v_n]);
    a_rs := array_fill(NULL::bigint, ARRAY[v_n]);
    a_stopped := array_fill(false, ARRAY[v_n]);
    a_on := array_fill(true, ARRAY[v_n]);
    v_on := v_n;
    -- Rounds: the first gives every queue twice its even part of the page
    -- (at most an even share of half the budget); each later one gives
    -- four times that, at most what is left evenly, to the queues that
    -- stopped at their share at or before the page's cut (only they can
    -- still hold messages of the page). The walk ends when no queue may
    -- read on or the budget is spent. Each round is one statement over
    -- its queues, each read by its index from where it stopped; the
    -- filters run in the statement, so only matches reach this loop, and
    -- each queue's last entry read, to charge what it read and mark where
    -- it stopped.
    WHILE v_on > 0 AND v_left > 0 LOOP
        v_round := v_round + 1;
        IF v_round = 1 AND p_group_id IS NOT NULL THEN
            -- A group's read sorts all its entries past the cursor whatever
            -- the share: one round, with the whole budget.
            v_share := greatest(1, v_left / v_on);
        ELSIF v_round = 1 THEN
            v_share := greatest(1, least(v_left / (2 * v_on), 2 * ((p_max_matches + v_on - 1) / v_on)));
        ELSE
            -- Growing by four, so that the cut of each round (the page's
            -- matches so far) bounds the next before the budget is spent.
            v_share := least(v_left / v_on, 4 * v_share);
            EXIT WHEN v_share = 0;
        END IF;
        FOR i IN 1 .. v_n LOOP
            IF a_on[i] THEN
                a_stopped[i] := false;
            END IF;
        END LOOP;
        -- The two statements differ only in how they find a queue's
        -- candidates; each keeps a plan of its own.
        IF p_group_id IS NULL THEN
            OPEN c FOR
                SELECT q.i, x.sequence, x.sent_at, x.state, x.ok, x.n, x.last,
                       CASE WHEN x.ok THEN skipq.message_wire_size(x.body, x.body_binary, x.metadata, x.tags,
                           x.message_id, x.client_id, x.re_routed_from) + octet_length(q.name) END AS size
                FROM unnest(a_id, a_name, a_rt, a_rs, a_on) WITH ORDINALITY AS q(id, name, rt, rs, active, i)
                CROSS JOIN LATERAL (
                    SELECT y.*, s.state,
                           (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                           AND y.tags @> p_tags
                           AND (y.expires_at IS NULL OR y.expires_at > v_now) AS ok,
                           row_number() OVER w AS n,
                           lead(y.sequence) OVER w IS NULL AS last
                    FROM (
                        SELECT m.* FROM skipq.messages m
                        WHERE m.queue_id = q.id
                          AND m.sent_at >= coalesce(p_sent_after, '-infinity')
                          AND m.sent_at < coalesce(p_sent_before, 'infinity')
                          AND m.sent_at <= coalesce(p_after_sent_at, 'infinity')
                          AND m.sent_at <= coalesce(q.rt, 'infinity')
                          AND m.sent_at >= coalesce(v_cut, '-infinity')
                          AND (p_after_sent_at IS NULL OR m.sent_at < p_after_sent_at
                               OR (q.name COLLATE "C", m.sequence) > (p_after_queue COLLATE "C", p_after_sequence))
                          AND (q.rt IS NULL OR m.sent_at < q.rt OR m.sequence > q.rs)
                        ORDER BY m.sent_at DESC, m.sequence
                        LIMIT v_share) y
                    CROSS JOIN LATERAL (SELECT skipq.message_search_state(y.dead_lettered_at, y.visible_at,
                        y.receive_count, y.max_receive_count, y.lease_token, v_now) AS state) s
                    WINDOW w AS (ORDER BY y.sent_at DESC, y.sequence)
                ) x
                WHERE q.active AND (x.ok OR x.last);
        ELSE
            OPEN c FOR
                SELECT q.i, x.sequence, x.sent_at, x.state, x.ok, x.n, x.last,
                       CASE WHEN x.ok THEN skipq.message_wire_size(x.body, x.body_binary, x.metadata, x.tags,
                           x.message_id, x.client_id, x.re_routed_from) + octet_length(q.name) END AS size
                FROM unnest(a_id, a_name, a_rt, a_rs, a_on) WITH ORDINALITY AS q(id, name, rt, rs, active, i)
                CROSS JOIN LATERAL (
                    SELECT y.*, s.state,
                           (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                           AND y.tags @> p_tags
                           AND (y.expires_at IS NULL OR y.expires_at > v_now) AS ok,
                           row_number() OVER w AS n,
                           lead(y.sequence) OVER w IS NULL AS last
                    FROM (
                        SELECT m.* FROM skipq.messages m
                        WHERE (m.queue_id::text || '/' || m.group_id) = (q.id::text || '/' || p_group_id)
                          AND m.group_id IS NOT NULL
                          AND m.sent_at >= coalesce(p_sent_after, '-infinity')
                          AND m.sent_at < coalesce(p_sent_before, 'infinity')
                          AND m.sent_at <= coalesce(p_after_sent_at, 'infinity')
                          AND m.sent_at <= coalesce(q.rt, 'infinity')
                          AND m.sent_at >= coalesce(v_cut, '-infinity')
                          AND (p_after_sent_at IS NULL OR m.sent_at < p_after_sent_at
                               OR (q.name COLLATE "C", m.sequence) > (p_after_queue COLLATE "C", p_after_sequence))
                          AND (q.rt IS NULL OR m.sent_at < q.rt OR m.sequence > q.rs)
                        ORDER BY m.sent_at DESC, m.sequence
                        LIMIT v_share) y
                    CROSS JOIN LATERAL (SELECT skipq.message_search_state(y.dead_lettered_at, y.visible_at,
                        y.receive_count, y.max_receive_count, y.lease_token, v_now) AS state) s
                    WINDOW w AS (ORDER BY y.sent_at DESC, y.sequence)
                ) x
                WHERE q.active AND (x.ok OR x.last);
        END IF;
        LOOP
            FETCH c INTO r;
            EXIT WHEN NOT FOUND;
            IF r.ok THEN
                queue_id := a_id[r.i]; queue_name := a_name[r.i]; sequence := r.sequence; sent_at := r.sent_at;
                state := r.state; size := r.size; matched := true; exhausted := false;
                RETURN NEXT;
                v_times := v_times || r.sent_at;
            END IF;
            IF r.last THEN
                a_rt[r.i] := r.sent_at; a_rs[r.i] := r.sequence;
                a_stopped[r.i] := r.n = v_share;
                v_left := v_left - r.n;
            END IF;
        END LOOP;
        CLOSE c;
        IF cardinality(v_times) >= p_max_matches THEN
            v_times := ARRAY(SELECT t FROM unnest(v_times) t ORDER BY t DESC LIMIT p_max_matches);
            v_cut := v_times[p_max_matches];
        END IF;
        v_on := 0;
        FOR i IN 1 .. v_n LOOP
            a_on[i] := a_stopped[i] AND (v_cut IS NULL OR a_rt[i] >= v_cut);
            IF a_on[i] THEN
                v_on := v_on + 1;
            END IF;
        END LOOP;
    END LOOP;
    -- The walk-end marks: the last entry each queue read where it stopped
    -- at its share.
    FOR i IN 1 .. v_n LOOP
        IF a_stopped[i] THEN
            queue_id := a_id[i]; queue_name := a_name[i]; sequence := a_rs[i]; sent_at := a_rt[i];
            state := ''; size := 0; matched := false; exhausted := true;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_search_bounded_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_budget bigint, p_max_matches bigint, p_now timestamp with time zone, p_group_id text) FROM PUBLIC;
