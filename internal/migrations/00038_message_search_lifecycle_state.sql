-- +goose Up
-- A message's state is the same on every route: search reports the state
-- that GET, browse, the console and the CLI report (skipq.message_state:
-- available, delayed, in_flight or acked). A dead letter waiting in its
-- dead-letter queue is an ordinary message there, as in SQS (a DLQ is a
-- queue like any other; its messages are visible and received as usual):
-- it is available (or delayed), and its deadLetteredAt and deadLetter
-- fields say where it came from. dead_lettered stays a search filter: the
-- messages dead-lettered into their queue and not received from it since.
-- The walks before (00022, 00029, 00032) reported such a message as
-- dead_lettered, and a filter on available left it out.
--
-- skipq.message_search_match is the filter, in one place, for the walk
-- below and for the search by messageId (internal/queries/messages.sql).
-- +goose StatementBegin
CREATE FUNCTION skipq.message_search_match(p_states text[], p_state text,
    p_dead_lettered_at timestamptz, p_receive_count integer) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT cardinality(p_states) = 0 OR p_state = ANY(p_states)
        OR ('dead_lettered' = ANY(p_states) AND p_dead_lettered_at IS NOT NULL AND p_receive_count = 0)
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_search_match(text[], text, timestamptz, integer) FROM PUBLIC;

-- The bounded walk of 00032, reporting each message's state as above and
-- filtering with skipq.message_search_match. A new name, not a new body:
-- nodes of the previous release call 00032's walk and keep its meaning
-- until they are gone (it and skipq.message_search_state are dropped a
-- release later, DESIGN.md "Online migrations").
-- +goose StatementBegin
CREATE FUNCTION skipq.message_search_lifecycle_walk(
    p_queue_ids bigint[], p_states text[], p_tags jsonb,
    p_sent_after timestamptz, p_sent_before timestamptz,
    p_after_sent_at timestamptz, p_after_queue text, p_after_sequence bigint,
    p_budget bigint, p_max_matches bigint, p_now timestamptz, p_group_id text)
RETURNS TABLE (queue_id bigint, queue_name text, sequence bigint, sent_at timestamptz,
               matched boolean, state text, size bigint, exhausted boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- One plan per statement for every call: a custom plan costs more than
-- the page it reads.
SET plan_cache_mode = force_generic_plan
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
                           skipq.message_search_match(p_states, s.state, y.dead_lettered_at, y.receive_count)
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
                    CROSS JOIN LATERAL (SELECT skipq.message_state(y.visible_at, y.receive_count,
                        y.max_receive_count, y.lease_token, v_now) AS state) s
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
                           skipq.message_search_match(p_states, s.state, y.dead_lettered_at, y.receive_count)
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
                    CROSS JOIN LATERAL (SELECT skipq.message_state(y.visible_at, y.receive_count,
                        y.max_receive_count, y.lease_token, v_now) AS state) s
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
REVOKE ALL ON FUNCTION skipq.message_search_lifecycle_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz, text) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.message_search_lifecycle_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz, text);
DROP FUNCTION skipq.message_search_match(text[], text, timestamptz, integer);
