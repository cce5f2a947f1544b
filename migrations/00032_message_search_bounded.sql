-- +goose Up
-- Search's walk with a hard bound on what one request reads: p_budget
-- index entries in all, whatever the page size and the number of queues.
-- The walks before (00022, 00029) gave each queue max(a page, budget /
-- queues) entries, so a page of 1,000 over 1,000 queues could read a
-- million. Here the walk goes in rounds: the first gives every queue twice
-- its even part of the page (at most an even share of half the budget);
-- each later one gives what is left,
-- evenly, to the queues that stopped at their share at or before the
-- page's cut (the oldest sentAt of the newest p_max_matches matches found
-- so far): only they can still hold messages of the page, and a queue
-- that ended, or was cut, leaves its rest to them. A page whose messages
-- sit in a few queues is thus read from those queues, not a share from
-- each. At least one entry per queue; the caller gives a budget of at
-- least that. Each queue that stopped at its share returns the last entry
-- it read as its walk-end mark (exhausted), as before: the page ends at
-- the earliest mark and the next one goes on from there, so a page may be
-- short but nothing is skipped. Each queue's statement also returns its
-- last entry (lead() looks one ahead), to charge what it read.
--
-- Queue names compare bytewise (COLLATE "C") in the cursor condition, as
-- the node orders them (Go's string order): under a database collation
-- that orders names otherwise, ties in sentAt across queues would be
-- skipped or repeated across pages.
--
-- A new name, not a new body: nodes of the previous release call 00029's
-- walk with a per-queue budget (dropped a release later, DESIGN.md
-- "Online migrations").
-- +goose StatementBegin
CREATE FUNCTION skipq.message_search_bounded_walk(
    p_queue_ids bigint[], p_states text[], p_tags jsonb,
    p_sent_after timestamptz, p_sent_before timestamptz,
    p_after_sent_at timestamptz, p_after_queue text, p_after_sequence bigint,
    p_budget bigint, p_max_matches bigint, p_now timestamptz, p_group_id text)
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
    m record;
    c refcursor;
    -- The queues, by index i: id, name, where the next read resumes (NULL:
    -- from the search's cursor), matches found, whether the last read
    -- stopped at its share (then a_rt/a_rs is its walk-end mark), and
    -- whether the next round reads on.
    a_id bigint[];
    a_name text[];
    a_rt timestamptz[];
    a_rs bigint[];
    a_found bigint[];
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
    v_read bigint;
    v_qid bigint;
    v_qname text;
    v_rt timestamptz;
    v_rs bigint;
BEGIN
    SELECT array_agg(z.id), array_agg(z.name) INTO a_id, a_name
    FROM skipq.queues z WHERE z.id = ANY(p_queue_ids);
    v_n := coalesce(cardinality(a_id), 0);
    a_rt := array_fill(NULL::timestamptz, ARRAY[v_n]);
    a_rs := array_fill(NULL::bigint, ARRAY[v_n]);
    a_found := array_fill(0::bigint, ARRAY[v_n]);
    a_stopped := array_fill(false, ARRAY[v_n]);
    a_on := array_fill(true, ARRAY[v_n]);
    v_on := v_n;
    -- Rounds: the first gives every queue twice its even part of the page
    -- (at most an even share of half the budget); each later one gives
    -- what is left, evenly, to the queues that stopped at their share at
    -- or before the page's cut (only they can still hold messages of the
    -- page). The walk ends when no queue may read on or the budget is
    -- spent.
    WHILE v_on > 0 AND v_left > 0 LOOP
        v_round := v_round + 1;
        IF v_round = 1 THEN
            -- Twice a queue's part of the page, at most half the budget:
            -- a page spread over many queues takes a little from each.
            v_share := greatest(1, least(v_left / (2 * v_on), 2 * ((p_max_matches + v_on - 1) / v_on)));
        ELSE
            v_share := v_left / v_on;
            EXIT WHEN v_share = 0;
        END IF;
        FOR i IN 1 .. v_n LOOP
            CONTINUE WHEN NOT a_on[i];
            v_qid := a_id[i]; v_qname := a_name[i]; v_rt := a_rt[i]; v_rs := a_rs[i];
            v_read := 0;
            a_stopped[i] := false;
            IF p_group_id IS NULL THEN
                OPEN c FOR
                    SELECT y.sequence, y.sent_at, y.state, y.ok, y.n, y.last,
                           skipq.message_wire_size(y.body, y.body_binary, y.metadata, y.tags, y.message_id,
                               y.client_id, y.re_routed_from) + octet_length(v_qname) AS size
                    FROM (
                        SELECT x.*, s.state,
                               (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                               AND x.tags @> p_tags
                               AND (x.expires_at IS NULL OR x.expires_at > v_now) AS ok,
                               row_number() OVER w AS n,
                               lead(x.sequence) OVER w IS NULL AS last
                        FROM (
                            SELECT m.* FROM skipq.messages m
                            WHERE m.queue_id = v_qid
                              AND m.sent_at >= coalesce(p_sent_after, '-infinity')
                              AND m.sent_at < coalesce(p_sent_before, 'infinity')
                              AND m.sent_at <= coalesce(p_after_sent_at, 'infinity')
                              AND m.sent_at >= coalesce(v_cut, '-infinity')
                              AND m.sent_at <= coalesce(v_rt, 'infinity')
                              AND (v_rt IS NULL OR m.sent_at < v_rt OR m.sequence > v_rs)
                              AND (p_after_sent_at IS NULL OR m.sent_at < p_after_sent_at
                                   OR (v_qname COLLATE "C", m.sequence) > (p_after_queue COLLATE "C", p_after_sequence))
                            ORDER BY m.sent_at DESC, m.sequence
                            LIMIT v_share) x
                        CROSS JOIN LATERAL (SELECT skipq.message_search_state(x.dead_lettered_at, x.visible_at,
                            x.receive_count, x.max_receive_count, x.lease_token, v_now) AS state) s
                        WINDOW w AS (ORDER BY x.sent_at DESC, x.sequence)
                    ) y
                    WHERE y.ok OR y.last
                    ORDER BY y.sent_at DESC, y.sequence;
            ELSE
                OPEN c FOR
                    SELECT y.sequence, y.sent_at, y.state, y.ok, y.n, y.last,
                           skipq.message_wire_size(y.body, y.body_binary, y.metadata, y.tags, y.message_id,
                               y.client_id, y.re_routed_from) + octet_length(v_qname) AS size
                    FROM (
                        SELECT x.*, s.state,
                               (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                               AND x.tags @> p_tags
                               AND (x.expires_at IS NULL OR x.expires_at > v_now) AS ok,
                               row_number() OVER w AS n,
                               lead(x.sequence) OVER w IS NULL AS last
                        FROM (
                            SELECT m.* FROM skipq.messages m
                            WHERE (m.queue_id::text || '/' || m.group_id) = (v_qid::text || '/' || p_group_id)
                              AND m.group_id IS NOT NULL
                              AND m.sent_at >= coalesce(p_sent_after, '-infinity')
                              AND m.sent_at < coalesce(p_sent_before, 'infinity')
                              AND m.sent_at <= coalesce(p_after_sent_at, 'infinity')
                              AND m.sent_at >= coalesce(v_cut, '-infinity')
                              AND m.sent_at <= coalesce(v_rt, 'infinity')
                              AND (v_rt IS NULL OR m.sent_at < v_rt OR m.sequence > v_rs)
                              AND (p_after_sent_at IS NULL OR m.sent_at < p_after_sent_at
                                   OR (v_qname COLLATE "C", m.sequence) > (p_after_queue COLLATE "C", p_after_sequence))
                            ORDER BY m.sent_at DESC, m.sequence
                            LIMIT v_share) x
                        CROSS JOIN LATERAL (SELECT skipq.message_search_state(x.dead_lettered_at, x.visible_at,
                            x.receive_count, x.max_receive_count, x.lease_token, v_now) AS state) s
                        WINDOW w AS (ORDER BY x.sent_at DESC, x.sequence)
                    ) y
                    WHERE y.ok OR y.last
                    ORDER BY y.sent_at DESC, y.sequence;
            END IF;
            LOOP
                FETCH c INTO m;
                EXIT WHEN NOT FOUND;
                -- The statement has read m.n entries (one more, looking
                -- ahead for the last).
                v_read := least(v_share, m.n + 1);
                a_rt[i] := m.sent_at; a_rs[i] := m.sequence;
                IF m.ok THEN
                    queue_id := v_qid; queue_name := v_qname; sequence := m.sequence; sent_at := m.sent_at;
                    state := m.state; size := m.size; matched := true; exhausted := false;
                    RETURN NEXT;
                    v_times := v_times || m.sent_at;
                    a_found[i] := a_found[i] + 1;
                    EXIT WHEN a_found[i] >= p_max_matches;
                END IF;
                IF m.last THEN
                    v_read := m.n;
                    a_stopped[i] := m.n = v_share;
                END IF;
            END LOOP;
            CLOSE c;
            v_left := v_left - v_read;
            IF cardinality(v_times) >= p_max_matches THEN
                v_times := ARRAY(SELECT t FROM unnest(v_times) t ORDER BY t DESC LIMIT p_max_matches);
                v_cut := v_times[p_max_matches];
            END IF;
        END LOOP;
        v_on := 0;
        FOR i IN 1 .. v_n LOOP
            a_on[i] := a_stopped[i] AND a_found[i] < p_max_matches AND (v_cut IS NULL OR a_rt[i] >= v_cut);
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
REVOKE ALL ON FUNCTION skipq.message_search_bounded_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz, text) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.message_search_bounded_walk(bigint[], text[], jsonb, timestamptz, timestamptz,
    timestamptz, text, bigint, bigint, bigint, timestamptz, text);
