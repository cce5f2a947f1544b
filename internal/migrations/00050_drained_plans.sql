-- +goose Up
-- Plans made on a drained table's statistics (one live row over hundreds of
-- pages: docs/DESIGN.md, "Settling by address") in the FIFO groups'
-- functions that are not settles:
--
-- group_enter (every send to a FIFO queue): the NOT EXISTS of a group's
-- row was an anti join that walked message_groups_pkey over every group of
-- every queue for each send. The row is probed by a bounded range of the
-- group id in its order, which only the primary key serves (sorts are
-- off, now in this function too: its own sorts, of the locks and of the
-- rows to insert, have no other plan and stay; message_groups_turn_idx, by
-- queue and turn, costs the same as the key on such statistics), in a
-- subquery a plan cannot turn into a join.
--
-- group_prune (the worker): the delete of the emptied groups joined the
-- groups found to the table by key, a walk of every group with the found
-- ones as a join filter (18,000 buffers to prune 9 of 1,000 groups). The
-- groups are now locked by the same bounded probe and deleted at the
-- addresses the lock found.
--
-- The topics' upkeep (the worker): the delete of old bodies kept each body
-- while a retained message or a copy in a queue named it, by NOT EXISTS:
-- anti joins a plan on drained statistics runs as a walk of the message id
-- index (or of topic_retained) per body. Both are now probes in subqueries
-- with LIMIT 1, which a plan cannot turn into a join; a message by id has
-- only the id index to be probed by.
--
-- topic_replay (the worker): a retained message's copy in the queue was
-- looked up by message_id and queue_id, which on drained statistics cost
-- the same through the primary key's walk of the queue as through the id
-- index; the queue is compared as queue_id + 0, which no index serves.
--
-- topic_retention_prune (the worker): the retained messages whose
-- retention ended were deleted by a join by key, a walk of the topic's
-- retained messages per one deleted on such statistics; they are deleted
-- at the addresses the walk found (retained messages are never updated).
--
-- topic_publish (a publish with keys): the bodies of the keys were read by
-- `topic_id = … AND message_id = ANY(…)`, which a plan on drained
-- statistics keeps as a filter over all of the topic's bodies; each key is
-- probed on its own now.
--
-- Signatures and meanings are unchanged: the previous release calls them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_enter(p_queue_ids bigint[], p_group_ids text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(l.k) FROM (
        SELECT DISTINCT skipq.group_lock_key(u.q, u.g) AS k
        FROM unnest(p_queue_ids, p_group_ids) AS u(q, g) WHERE u.g IS NOT NULL ORDER BY 1) l;
    -- A new statement: its snapshot sees every sender that held a lock
    -- before, and every prune that deleted a row (it holds the lock too).
    INSERT INTO skipq.message_groups (queue_id, group_id)
    SELECT n.q, n.g FROM (
        SELECT u.q, u.g, min(u.i) AS i FROM unnest(p_queue_ids, p_group_ids) WITH ORDINALITY AS u(q, g, i)
        WHERE u.g IS NOT NULL GROUP BY u.q, u.g) n
    WHERE (SELECT x.turn FROM skipq.message_groups x
           WHERE x.queue_id = n.q AND x.group_id >= n.g AND x.group_id <= n.g
           ORDER BY x.group_id LIMIT 1) IS NULL
    ORDER BY n.i
    ON CONFLICT DO NOTHING;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_prune(p_max integer, p_scan integer, p_after_queue_id bigint, p_after_group_id text, OUT pruned integer, OUT next_queue_id bigint, OUT next_group_id text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_from bigint := coalesce(p_after_queue_id, 0); -- queue ids start at 1
    v_from_group text := coalesce(p_after_group_id, '');
    v_end record;
    v_rows tid[];
    v_q bigint[];
    v_g text[];
BEGIN
    -- The window's last group; none when fewer than p_scan are left.
    SELECT w.queue_id, w.group_id INTO v_end FROM skipq.message_groups w
    WHERE (w.queue_id, w.group_id) > (v_from, v_from_group)
    ORDER BY w.queue_id, w.group_id
    OFFSET p_scan - 1 LIMIT 1;
    -- The window walked on the primary key, in its order, each group
    -- then locked on its own (a filter on a range of the table would be
    -- planned on message_groups_turn_idx, probing every group of the
    -- queues in range before sorting them).
    SELECT array_agg(e.row), array_agg(e.queue_id), array_agg(e.group_id) INTO v_rows, v_q, v_g FROM (
        SELECT x.row, x.queue_id, x.group_id
        FROM (SELECT w.queue_id, w.group_id FROM skipq.message_groups w
              WHERE (w.queue_id, w.group_id) > (v_from, v_from_group)
              ORDER BY w.queue_id, w.group_id
              LIMIT p_scan) w
        CROSS JOIN LATERAL (
            SELECT x.ctid AS row, x.queue_id, x.group_id FROM skipq.message_groups x
            WHERE x.queue_id = w.queue_id AND x.group_id >= w.group_id AND x.group_id <= w.group_id
              AND CASE WHEN NOT skipq.group_has_messages(x.queue_id, x.group_id)
                       THEN pg_try_advisory_xact_lock(skipq.group_lock_key(x.queue_id, x.group_id)) ELSE false END
            ORDER BY x.group_id LIMIT 1
            FOR UPDATE SKIP LOCKED) x
        LIMIT p_max) e;
    pruned := 0;
    IF v_q IS NOT NULL THEN
        -- By address: this transaction holds the rows locked since the
        -- statement above, so none moved.
        DELETE FROM skipq.message_groups x
        WHERE x.ctid = ANY(v_rows)
          AND NOT skipq.group_has_messages(x.queue_id, x.group_id);
        GET DIAGNOSTICS pruned = ROW_COUNT;
    END IF;
    IF cardinality(v_q) = p_max THEN
        next_queue_id := v_q[p_max];
        next_group_id := v_g[p_max];
    ELSE
        -- Past the window; NULL (the table's end) starts over.
        next_queue_id := v_end.queue_id;
        next_group_id := v_end.group_id;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_upkeep(p_after bigint, p_max integer) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_last bigint;
BEGIN
    WITH folded AS (
        DELETE FROM skipq.topic_counts c
        WHERE c.id = ANY(ARRAY(SELECT id FROM skipq.topic_counts ORDER BY id LIMIT 10000 FOR UPDATE SKIP LOCKED))
        RETURNING c.topic_id, c.published, c.delivered, c.unrouted
    ), summed AS (
        SELECT f.topic_id, sum(f.published) AS p, sum(f.delivered) AS d, sum(f.unrouted) AS u
        FROM folded f GROUP BY f.topic_id
    )
    UPDATE skipq.topics t SET published = t.published + s.p, delivered = t.delivered + s.d,
                              unrouted = t.unrouted + s.u
    FROM summed s WHERE t.id = s.topic_id;

    DELETE FROM skipq.topic_subscriptions s
    WHERE NOT EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = s.queue_id);
    DELETE FROM skipq.topic_replays r
    WHERE NOT EXISTS (SELECT 1 FROM skipq.topic_subscriptions s
                      WHERE s.topic_id = r.topic_id AND s.queue_id = r.queue_id AND s.created_at <= r.created_at);

    SELECT max(w.id) INTO v_last FROM (
        SELECT b.id FROM skipq.topic_bodies b WHERE b.id > p_after ORDER BY b.id LIMIT p_max) w;
    DELETE FROM skipq.topic_bodies b
    WHERE b.id > p_after AND b.id <= v_last
      AND b.window_ends <= now()
      AND (SELECT r.id FROM skipq.topic_retained r WHERE r.topic_id = b.topic_id AND r.id = b.id LIMIT 1) IS NULL
      AND (SELECT m.sequence FROM skipq.messages m
           WHERE m.message_id = b.message_id AND m.tags ->> 'skipq.body' = b.id::text LIMIT 1) IS NULL;
    IF v_last IS NULL OR NOT EXISTS (SELECT 1 FROM skipq.topic_bodies b WHERE b.id > v_last) THEN
        RETURN 0;
    END IF;
    RETURN v_last;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_replay(p_max integer) RETURNS TABLE(queue_id bigint, copied integer, available integer, more boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    s         skipq.topic_replays;
    v_filter  jsonb;
    t         skipq.topics;
    q         skipq.queues;
    v_final   boolean := false;
    v_horizon bigint;
    v_last    bigint;
    v_rows    skipq.topic_retained[];
    v_copied  integer := 0;
    v_ready   integer := 0;
BEGIN
-- One step of one replaying subscription (the oldest no other worker is
-- on): the next p_max retained messages of its topic, in publish order,
-- through a send to its queue of those published since its replay_from
-- that match its filter. Publishes do not wait for it, except for a
-- moment when it notes how far they have committed (the topic's lock,
-- which waits for those in flight) and for the last step: that one copies
-- the last few under the lock and makes the subscription live, so the next
-- publish reaches it directly.
    SELECT x.* INTO s FROM skipq.topic_replays x
    WHERE EXISTS (SELECT 1 FROM skipq.topic_subscriptions y
                  WHERE y.topic_id = x.topic_id AND y.queue_id = x.queue_id AND y.created_at <= x.created_at)
      AND EXISTS (SELECT 1 FROM skipq.queues y WHERE y.id = x.queue_id)
    ORDER BY x.created_at LIMIT 1 FOR UPDATE OF x SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO t FROM skipq.topics WHERE id = s.topic_id;
    SELECT * INTO q FROM skipq.queues WHERE id = s.queue_id;
    SELECT x.filter INTO v_filter FROM skipq.topic_subscriptions x
    WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
    IF s.replay_horizon IS NULL OR s.replay_after >= s.replay_horizon THEN
        PERFORM pg_advisory_xact_lock(skipq.topic_lock_key(t.id));
        -- Every id drawn so far is of a publish that committed or rolled
        -- back: publishers draw theirs under the lock, shared.
        SELECT last_value INTO v_horizon FROM skipq.topic_body_sequence;
        IF (SELECT count(*) FROM (SELECT 1 FROM skipq.topic_retained r
                                  WHERE r.topic_id = t.id AND r.id > s.replay_after LIMIT p_max + 1) l) > p_max THEN
            UPDATE skipq.topic_replays x SET replay_horizon = v_horizon
            WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
            RETURN QUERY SELECT q.id, 0, 0, true;
            RETURN;
        END IF;
        v_final := true;
    END IF;
    v_rows := ARRAY(
        SELECT r FROM skipq.topic_retained r
        WHERE r.topic_id = t.id AND r.id > s.replay_after AND (v_final OR r.id <= s.replay_horizon)
        ORDER BY r.id LIMIT p_max);
    v_last := (SELECT max(r.id) FROM unnest(v_rows) r);
    -- Those to send: published since the replay's start, matching the
    -- filter, and not in the queue already.
    v_rows := ARRAY(
        SELECT r FROM unnest(v_rows) r
        WHERE r.published_at >= s.replay_from
          -- No filter matches every message: a call of skipq.topic_matches
          -- per message (a function with settings, never inlined) was a
          -- quarter of a step.
          AND CASE WHEN v_filter IS NULL THEN true ELSE skipq.topic_matches(v_filter, r.tags) END
          -- One probe of messages_message_id_queue_key per message (OFFSET 0
          -- keeps it one): as an anti join the planner read every message
          -- of the queue once per step and compared each with every
          -- retained one, so a step's time grew with the replay's progress
          -- (1,000 x 14,000 comparisons, 2.5 s, after 14 steps).
          AND NOT EXISTS (SELECT 1 FROM skipq.messages m WHERE m.message_id = r.message_id AND m.queue_id + 0 = q.id
                          OFFSET 0)
        ORDER BY r.id);
    IF cardinality(v_rows) > 0 THEN
        SELECT count(*), count(*) FILTER (WHERE m.delayed_to IS NULL) INTO v_copied, v_ready
        FROM skipq.message_insert(
            q.tenant, q.name, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT r.message_id FROM unnest(v_rows) r),
            array_fill(q.content_based_dedup, ARRAY[cardinality(v_rows)]),
            ARRAY(SELECT r.client_id FROM unnest(v_rows) r),
            ARRAY(SELECT r.metadata FROM unnest(v_rows) r),
            ARRAY(SELECT r.body_binary FROM unnest(v_rows) r),
            ARRAY(SELECT (r.tags || jsonb_build_object('skipq.topic', t.name, 'skipq.body', r.id::text))::text
                  FROM unnest(v_rows) r),
            array_fill(-1, ARRAY[cardinality(v_rows)]),
            ARRAY(SELECT r.expiration_seconds FROM unnest(v_rows) r),
            ARRAY(SELECT r.max_receive_count FROM unnest(v_rows) r),
            ARRAY(SELECT coalesce(r.dead_letter_queue, '') FROM unnest(v_rows) r),
            ARRAY(SELECT r.dead_letter_queue IS NOT NULL FROM unnest(v_rows) r),
            array_fill(1, ARRAY[cardinality(v_rows)]), array_fill(0, ARRAY[cardinality(v_rows)]), '\x'::bytea,
            CASE WHEN t.fifo THEN ARRAY(SELECT r.group_id FROM unnest(v_rows) r) END) m
        WHERE m.outcome IN ('sent', 'duplicate');
    END IF;
    IF v_final THEN
        DELETE FROM skipq.topic_replays x WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
    ELSE
        UPDATE skipq.topic_replays x SET replay_after = coalesce(v_last, s.replay_horizon)
        WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
    END IF;
    RETURN QUERY SELECT q.id, v_copied, v_ready, NOT v_final;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_retention_prune(p_now timestamp with time zone, p_max integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_topic   bigint;
    v_removed integer := 0;
    v_n       integer;
BEGIN
-- Removes retained messages whose retention ended (the topic's
-- retainSeconds after their publish; all of a topic deleted or retaining
-- nothing now), at most p_max in all, oldest first per topic, never one a
-- replaying subscription has not been through yet. The bodies go with the
-- worker's skipq.topic_upkeep once no copy names them.
    FOR v_topic IN
        -- The topics that retain anything: a skip scan of the primary key.
        WITH RECURSIVE ids(id) AS (
            SELECT min(r.topic_id) FROM skipq.topic_retained r
            UNION ALL
            SELECT (SELECT min(r.topic_id) FROM skipq.topic_retained r WHERE r.topic_id > ids.id)
            FROM ids WHERE ids.id IS NOT NULL)
        SELECT ids.id FROM ids WHERE ids.id IS NOT NULL
    LOOP
        EXIT WHEN v_removed >= p_max;
        WITH doomed AS (
            SELECT w.row FROM (
                SELECT r.ctid AS row, r.id, r.published_at FROM skipq.topic_retained r
                WHERE r.topic_id = v_topic ORDER BY r.id LIMIT p_max - v_removed) w
            WHERE w.published_at + make_interval(secs => coalesce(
                      (SELECT t.retain_seconds FROM skipq.topics t WHERE t.id = v_topic), 0)) <= p_now
              AND w.id <= coalesce((SELECT min(s.replay_after) FROM skipq.topic_replays s
                                    WHERE s.topic_id = v_topic), w.id)
        )
        DELETE FROM skipq.topic_retained r WHERE r.ctid = ANY(ARRAY(SELECT d.row FROM doomed d));
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_removed := v_removed + v_n;
    END LOOP;
    RETURN v_removed;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_publish(p_tenant text, p_topic text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(pos integer, message_id text, outcome text, delivered_to integer, published_at timestamp with time zone, woken bigint[])
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    t         skipq.topics;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    v_hash    bytea[];
    v_outcome text[] := array_fill('sent'::text, ARRAY[n]);
    v_count   integer[] := array_fill(0, ARRAY[n]);
    v_at      timestamptz[] := array_fill(v_now, ARRAY[n]);
    v_woken   text[] := array_fill(''::text, ARRAY[n]);
    v_body_id bigint[];
    v_fresh   integer[];
    v_pos     integer[];
    v_first   integer;
    -- A position repeating an earlier one's key within the call: that
    -- position, whose result it answers with.
    v_dupof   integer[] := array_fill(NULL::integer, ARRAY[n]);
    b         skipq.topic_bodies;
    -- Per position: its tags as given (what filters read), and as each
    -- group's copy carries them.
    v_src     jsonb[];
    v_copy    jsonb[];
    -- The copies of the groups written together: queue ids and positions.
    v_fq      bigint[] := '{}';
    v_fx      integer[] := '{}';
    s         record;
    r         record;
    i         integer;
BEGIN
    SELECT * INTO t FROM skipq.topics WHERE tenant = p_tenant AND name = p_topic;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- A FIFO topic's messages name a group, a standard topic's none (its
    -- groups' queues are of its kind), as a send to a queue.
    IF (CASE WHEN t.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL) END) THEN
        RETURN QUERY
            SELECT x, p_message_ids[x], CASE WHEN t.fifo THEN 'group_required' ELSE 'group_refused' END,
                   0, NULL::timestamptz, NULL::bigint[]
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = t.fifo ORDER BY x;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(skipq.topic_lock_key(t.id));

    IF true = ANY(p_keyed) THEN
        -- Publishers of one key are serialized until commit (lock-number
        -- order: two batches cannot deadlock); a key's body row is the
        -- first publish's result for as long as it exists (its window, and
        -- while a copy is still in a group).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/' || p_message_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE p_keyed[x] ORDER BY 1) l;
        v_hash := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        -- Each key's body by a probe of topic_bodies_message_key, in a
        -- subquery a plan cannot turn into a join (a key given twice
        -- finds its body twice, and sets the same outcome).
        FOR b IN
            SELECT d.* FROM generate_subscripts(p_message_ids, 1) x
            CROSS JOIN LATERAL (SELECT * FROM skipq.topic_bodies d
                                WHERE d.topic_id = t.id AND d.message_id = p_message_ids[x] LIMIT 1) d
            WHERE p_keyed[x]
        LOOP
            i := array_position(p_message_ids, b.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = b.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_count[i] := b.delivered_to; v_at[i] := b.published_at;
        END LOOP;
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT p_keyed[i];
            v_first := array_position(p_message_ids, p_message_ids[i]);
            CONTINUE WHEN v_first = i;
            v_outcome[i] := CASE WHEN v_hash[i] = v_hash[v_first] THEN 'duplicate' ELSE 'conflict' END;
            v_dupof[i] := v_first;
        END LOOP;
        IF 'conflict' = ANY(v_outcome) THEN
            RETURN QUERY
                SELECT x, p_message_ids[x], 'conflict'::text, 0, NULL::timestamptz, NULL::bigint[]
                FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'conflict' ORDER BY x;
            RETURN;
        END IF;
    END IF;

    v_fresh := ARRAY(SELECT x FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'sent' ORDER BY x);
    IF t.fifo AND t.retain_seconds > 0 THEN
        -- A replay goes by body id: publishers of one groupId draw their
        -- ids in the order they reach the groups (lock-number order).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/group/' || p_group_ids[x], 0) AS h
            FROM unnest(v_fresh) x ORDER BY 1) l;
    END IF;
    v_body_id := array_fill(NULL::bigint, ARRAY[n]);
    FOR i IN SELECT unnest(v_fresh) LOOP
        v_body_id[i] := nextval('skipq.topic_body_sequence');
    END LOOP;
    v_src := ARRAY(SELECT p_tags[x]::jsonb FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    v_copy := ARRAY(SELECT v_src[x] || jsonb_build_object('skipq.topic', t.name, 'skipq.body', v_body_id[x]::text)
                    FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    -- Each group in queue-id order, its matching messages. A group whose
    -- queue traces or deduplicates by content gets them through a send of
    -- its own (skipq.message_insert: trace ids and events, keys); the
    -- copies of all other groups are written below in one statement. This
    -- statement's snapshot comes after the shared lock: no subscription
    -- change is in flight.
    FOR s IN
        SELECT ts.queue_id, ts.filter, q.name, q.content_based_dedup,
               q.content_based_dedup OR EXISTS (SELECT 1 FROM skipq.queue_trace tr WHERE tr.queue_id = q.id)
                   AS alone
        FROM skipq.topic_subscriptions ts JOIN skipq.queues q ON q.id = ts.queue_id
        -- A subscription still replaying gets this publish from the
        -- retained messages (skipq.topic_replay), after the older ones.
        WHERE ts.topic_id = t.id
          AND NOT EXISTS (SELECT 1 FROM skipq.topic_replays rp WHERE rp.topic_id = ts.topic_id
                          AND rp.queue_id = ts.queue_id AND rp.created_at >= ts.created_at)
        ORDER BY ts.queue_id
    LOOP
        v_pos := CASE WHEN s.filter IS NULL THEN v_fresh
                      ELSE ARRAY(SELECT x FROM unnest(v_fresh) x
                                 WHERE skipq.topic_matches(s.filter, v_src[x]) ORDER BY x) END;
        CONTINUE WHEN cardinality(v_pos) = 0;
        IF NOT s.alone THEN
            v_fq := v_fq || array_fill(s.queue_id, ARRAY[cardinality(v_pos)]);
            v_fx := v_fx || v_pos;
            CONTINUE;
        END IF;
        FOR r IN
            SELECT * FROM skipq.message_insert(
                p_tenant, s.name, v_now, p_server_max_receive_count,
                ARRAY(SELECT p_message_ids[x] FROM unnest(v_pos) x),
                -- A queue that deduplicates by content would take every
                -- empty body for the same: its copies are keyed by id.
                array_fill(s.content_based_dedup, ARRAY[cardinality(v_pos)]),
                ARRAY(SELECT p_client_ids[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_metadatas[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_body_binaries[x] FROM unnest(v_pos) x),
                ARRAY(SELECT v_copy[x]::text FROM unnest(v_pos) x),
                ARRAY(SELECT p_delay_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_expiration_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_max_receive_counts[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queues[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queue_given[x] FROM unnest(v_pos) x),
                array_fill(1, ARRAY[cardinality(v_pos)]), array_fill(0, ARRAY[cardinality(v_pos)]), '\x'::bytea,
                CASE WHEN t.fifo THEN ARRAY(SELECT p_group_ids[x] FROM unnest(v_pos) x) END,
                NULL,
                CASE WHEN p_key_ids IS NOT NULL THEN ARRAY(SELECT p_key_ids[x] FROM unnest(v_pos) x) END) m
        LOOP
            IF r.queue_id <> s.queue_id THEN
                -- The subscribed queue was deleted and one of its name
                -- created after this statement read the subscriptions:
                -- that queue did not subscribe.
                RAISE EXCEPTION 'skipq: queue % was re-created during a publish', s.name
                    USING ERRCODE = '40001';
            END IF;
            CONTINUE WHEN r.outcome NOT IN ('sent', 'duplicate');
            i := v_pos[r.pos];
            v_count[i] := v_count[i] + 1;
            IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
                v_woken[i] := v_woken[i] || ',' || s.queue_id::text;
            END IF;
        END LOOP;
    END LOOP;

    IF cardinality(v_fx) > 0 THEN
        -- The other groups' copies, one insert for all: a send's insert
        -- (skipq.message_insert's, with each queue's defaults) of empty
        -- bodies, its sequences drawn group by group in position order
        -- after the FIFO groups' locks (skipq.group_enter, in lock-number
        -- order). A queue deleted since the subscriptions were read gets
        -- nothing (the join), as a send to a missing queue.
        IF t.fifo THEN
            PERFORM skipq.group_enter(v_fq, ARRAY(SELECT p_group_ids[f.x] FROM unnest(v_fx) WITH ORDINALITY AS f(x, k)
                                                 ORDER BY f.k));
        END IF;
        WITH inserted AS (
            INSERT INTO skipq.messages AS msg (
                queue_id, message_id, client_id, metadata, body, body_binary, tags,
                sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready, group_id)
            SELECT q.id, p_message_ids[f.x], p_client_ids[f.x], p_metadatas[f.x], '\x'::bytea,
                   p_body_binaries[f.x], v_copy[f.x],
                   v_now,
                   v_now + make_interval(secs => p.delay_seconds),
                   CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
                   CASE WHEN p.expiration_seconds > 0
                        THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
                   p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0, p_group_ids[f.x]
            -- Each queue looked up once, its copies' positions beside it.
            FROM skipq.queues q
            CROSS JOIN LATERAL (SELECT u.q, u.x FROM unnest(v_fq, v_fx) AS u(q, x) WHERE u.q = q.id) f
            CROSS JOIN LATERAL (SELECT
                CASE WHEN p_delay_seconds[f.x] < 0 THEN q.delay_seconds ELSE p_delay_seconds[f.x] END AS delay_seconds,
                CASE WHEN p_expiration_seconds[f.x] < 0 THEN q.expiration_seconds ELSE p_expiration_seconds[f.x] END
                    AS expiration_seconds,
                CASE WHEN p_max_receive_counts[f.x] > 0 THEN p_max_receive_counts[f.x]
                     WHEN q.max_receive_count > 0 THEN q.max_receive_count
                     ELSE p_server_max_receive_count END AS max_receive_count,
                CASE WHEN p_dead_letter_queue_given[f.x] THEN p_dead_letter_queues[f.x] ELSE q.dead_letter_queue END
                    AS dead_letter_queue
            ) p
            WHERE q.id = ANY(v_fq)
            ORDER BY f.q, f.x
            RETURNING msg.queue_id, msg.message_id, msg.sequence, msg.visible_at, msg.ready
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT w.queue_id, w.sequence FROM inserted w WHERE w.ready
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT w.visible_at, w.queue_id, w.sequence FROM inserted w WHERE NOT w.ready
        ), per_message AS (
            -- A fresh position's message id is its own (no two share one).
            SELECT w.message_id, count(*)::integer AS groups,
                   coalesce(string_agg(',' || w.queue_id::text, '' ORDER BY w.queue_id) FILTER (WHERE w.ready), '')
                       AS woken
            FROM inserted w GROUP BY w.message_id
        )
        SELECT array_agg(v_count[x] + coalesce(c.groups, 0) ORDER BY x),
               array_agg(v_woken[x] || coalesce(c.woken, '') ORDER BY x)
        INTO v_count, v_woken
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN per_message c ON v_outcome[x] = 'sent' AND c.message_id = p_message_ids[x];
    END IF;

    FOR i IN 1 .. n LOOP
        IF v_dupof[i] IS NOT NULL THEN
            v_count[i] := v_count[v_dupof[i]]; v_at[i] := v_at[v_dupof[i]];
        END IF;
    END LOOP;

    -- The bodies, once each: of the messages some group got, of keyed
    -- ones (their key answers a second publish even when nothing matched),
    -- and of every one a topic retains.
    INSERT INTO skipq.topic_bodies (id, topic_id, message_id, content_hash, body, published_at, window_ends,
                                    delivered_to)
    SELECT v_body_id[x], t.id, p_message_ids[x], CASE WHEN p_keyed[x] THEN v_hash[x] END,
           substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]), v_now,
           v_now + make_interval(secs => t.dedup_window_seconds), v_count[x]
    FROM unnest(v_fresh) x
    WHERE v_count[x] > 0 OR p_keyed[x] OR t.retain_seconds > 0;
    IF t.retain_seconds > 0 THEN
        -- What a replay sends again: the message as published.
        INSERT INTO skipq.topic_retained (topic_id, id, message_id, published_at, client_id, metadata,
                                          body_binary, tags, group_id, expiration_seconds, max_receive_count,
                                          dead_letter_queue)
        SELECT t.id, v_body_id[x], p_message_ids[x], v_now, p_client_ids[x], p_metadatas[x], p_body_binaries[x],
               v_src[x], p_group_ids[x], p_expiration_seconds[x], p_max_receive_counts[x],
               CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] END
        FROM unnest(v_fresh) x ORDER BY x;
    END IF;
    IF cardinality(v_fresh) > 0 THEN
        INSERT INTO skipq.topic_counts (topic_id, published, delivered, unrouted)
        SELECT t.id, count(*), sum(v_count[x]), count(*) FILTER (WHERE v_count[x] = 0)
        FROM unnest(v_fresh) x;
    END IF;

    RETURN QUERY
    SELECT x, p_message_ids[x], v_outcome[x], v_count[x], v_at[x],
           CASE WHEN v_woken[x] = '' THEN '{}'::bigint[] ELSE string_to_array(substr(v_woken[x], 2), ',')::bigint[] END
    FROM generate_subscripts(p_message_ids, 1) x ORDER BY x;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_enter(p_queue_ids bigint[], p_group_ids text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(l.k) FROM (
        SELECT DISTINCT skipq.group_lock_key(u.q, u.g) AS k
        FROM unnest(p_queue_ids, p_group_ids) AS u(q, g) WHERE u.g IS NOT NULL ORDER BY 1) l;
    -- A new statement: its snapshot sees every sender that held a lock
    -- before, and every prune that deleted a row (it holds the lock too).
    INSERT INTO skipq.message_groups (queue_id, group_id)
    SELECT n.q, n.g FROM (
        SELECT u.q, u.g, min(u.i) AS i FROM unnest(p_queue_ids, p_group_ids) WITH ORDINALITY AS u(q, g, i)
        WHERE u.g IS NOT NULL GROUP BY u.q, u.g) n
    WHERE NOT EXISTS (SELECT 1 FROM skipq.message_groups x WHERE x.queue_id = n.q AND x.group_id = n.g)
    ORDER BY n.i
    ON CONFLICT DO NOTHING;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_prune(p_max integer, p_scan integer, p_after_queue_id bigint, p_after_group_id text, OUT pruned integer, OUT next_queue_id bigint, OUT next_group_id text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_from bigint := coalesce(p_after_queue_id, 0); -- queue ids start at 1
    v_from_group text := coalesce(p_after_group_id, '');
    v_end record;
    v_q bigint[];
    v_g text[];
BEGIN
    -- The window's last group; none when fewer than p_scan are left.
    SELECT w.queue_id, w.group_id INTO v_end FROM skipq.message_groups w
    WHERE (w.queue_id, w.group_id) > (v_from, v_from_group)
    ORDER BY w.queue_id, w.group_id
    OFFSET p_scan - 1 LIMIT 1;
    -- The window walked on the primary key, in its order, each group
    -- then locked on its own (a filter on a range of the table would be
    -- planned on message_groups_turn_idx, probing every group of the
    -- queues in range before sorting them).
    SELECT array_agg(e.queue_id), array_agg(e.group_id) INTO v_q, v_g FROM (
        SELECT x.queue_id, x.group_id
        FROM (SELECT w.queue_id, w.group_id FROM skipq.message_groups w
              WHERE (w.queue_id, w.group_id) > (v_from, v_from_group)
              ORDER BY w.queue_id, w.group_id
              LIMIT p_scan) w
        CROSS JOIN LATERAL (
            SELECT x.queue_id, x.group_id FROM skipq.message_groups x
            WHERE x.queue_id = w.queue_id AND x.group_id = w.group_id
              AND CASE WHEN NOT skipq.group_has_messages(x.queue_id, x.group_id)
                       THEN pg_try_advisory_xact_lock(skipq.group_lock_key(x.queue_id, x.group_id)) ELSE false END
            FOR UPDATE SKIP LOCKED) x
        LIMIT p_max) e;
    pruned := 0;
    IF v_q IS NOT NULL THEN
        DELETE FROM skipq.message_groups x
        USING unnest(v_q, v_g) AS k(q, g)
        WHERE x.queue_id = k.q AND x.group_id = k.g
          AND NOT skipq.group_has_messages(k.q, k.g);
        GET DIAGNOSTICS pruned = ROW_COUNT;
    END IF;
    IF cardinality(v_q) = p_max THEN
        next_queue_id := v_q[p_max];
        next_group_id := v_g[p_max];
    ELSE
        -- Past the window; NULL (the table's end) starts over.
        next_queue_id := v_end.queue_id;
        next_group_id := v_end.group_id;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_upkeep(p_after bigint, p_max integer) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_last bigint;
BEGIN
    WITH folded AS (
        DELETE FROM skipq.topic_counts c
        WHERE c.id = ANY(ARRAY(SELECT id FROM skipq.topic_counts ORDER BY id LIMIT 10000 FOR UPDATE SKIP LOCKED))
        RETURNING c.topic_id, c.published, c.delivered, c.unrouted
    ), summed AS (
        SELECT f.topic_id, sum(f.published) AS p, sum(f.delivered) AS d, sum(f.unrouted) AS u
        FROM folded f GROUP BY f.topic_id
    )
    UPDATE skipq.topics t SET published = t.published + s.p, delivered = t.delivered + s.d,
                              unrouted = t.unrouted + s.u
    FROM summed s WHERE t.id = s.topic_id;

    DELETE FROM skipq.topic_subscriptions s
    WHERE NOT EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = s.queue_id);
    DELETE FROM skipq.topic_replays r
    WHERE NOT EXISTS (SELECT 1 FROM skipq.topic_subscriptions s
                      WHERE s.topic_id = r.topic_id AND s.queue_id = r.queue_id AND s.created_at <= r.created_at);

    SELECT max(w.id) INTO v_last FROM (
        SELECT b.id FROM skipq.topic_bodies b WHERE b.id > p_after ORDER BY b.id LIMIT p_max) w;
    DELETE FROM skipq.topic_bodies b
    WHERE b.id > p_after AND b.id <= v_last
      AND b.window_ends <= now()
      AND NOT EXISTS (SELECT 1 FROM skipq.topic_retained r WHERE r.topic_id = b.topic_id AND r.id = b.id)
      AND NOT EXISTS (SELECT 1 FROM skipq.messages m
                      WHERE m.message_id = b.message_id AND m.tags ->> 'skipq.body' = b.id::text);
    IF v_last IS NULL OR NOT EXISTS (SELECT 1 FROM skipq.topic_bodies b WHERE b.id > v_last) THEN
        RETURN 0;
    END IF;
    RETURN v_last;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_replay(p_max integer) RETURNS TABLE(queue_id bigint, copied integer, available integer, more boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    s         skipq.topic_replays;
    v_filter  jsonb;
    t         skipq.topics;
    q         skipq.queues;
    v_final   boolean := false;
    v_horizon bigint;
    v_last    bigint;
    v_rows    skipq.topic_retained[];
    v_copied  integer := 0;
    v_ready   integer := 0;
BEGIN
-- One step of one replaying subscription (the oldest no other worker is
-- on): the next p_max retained messages of its topic, in publish order,
-- through a send to its queue of those published since its replay_from
-- that match its filter. Publishes do not wait for it, except for a
-- moment when it notes how far they have committed (the topic's lock,
-- which waits for those in flight) and for the last step: that one copies
-- the last few under the lock and makes the subscription live, so the next
-- publish reaches it directly.
    SELECT x.* INTO s FROM skipq.topic_replays x
    WHERE EXISTS (SELECT 1 FROM skipq.topic_subscriptions y
                  WHERE y.topic_id = x.topic_id AND y.queue_id = x.queue_id AND y.created_at <= x.created_at)
      AND EXISTS (SELECT 1 FROM skipq.queues y WHERE y.id = x.queue_id)
    ORDER BY x.created_at LIMIT 1 FOR UPDATE OF x SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO t FROM skipq.topics WHERE id = s.topic_id;
    SELECT * INTO q FROM skipq.queues WHERE id = s.queue_id;
    SELECT x.filter INTO v_filter FROM skipq.topic_subscriptions x
    WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
    IF s.replay_horizon IS NULL OR s.replay_after >= s.replay_horizon THEN
        PERFORM pg_advisory_xact_lock(skipq.topic_lock_key(t.id));
        -- Every id drawn so far is of a publish that committed or rolled
        -- back: publishers draw theirs under the lock, shared.
        SELECT last_value INTO v_horizon FROM skipq.topic_body_sequence;
        IF (SELECT count(*) FROM (SELECT 1 FROM skipq.topic_retained r
                                  WHERE r.topic_id = t.id AND r.id > s.replay_after LIMIT p_max + 1) l) > p_max THEN
            UPDATE skipq.topic_replays x SET replay_horizon = v_horizon
            WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
            RETURN QUERY SELECT q.id, 0, 0, true;
            RETURN;
        END IF;
        v_final := true;
    END IF;
    v_rows := ARRAY(
        SELECT r FROM skipq.topic_retained r
        WHERE r.topic_id = t.id AND r.id > s.replay_after AND (v_final OR r.id <= s.replay_horizon)
        ORDER BY r.id LIMIT p_max);
    v_last := (SELECT max(r.id) FROM unnest(v_rows) r);
    -- Those to send: published since the replay's start, matching the
    -- filter, and not in the queue already.
    v_rows := ARRAY(
        SELECT r FROM unnest(v_rows) r
        WHERE r.published_at >= s.replay_from
          -- No filter matches every message: a call of skipq.topic_matches
          -- per message (a function with settings, never inlined) was a
          -- quarter of a step.
          AND CASE WHEN v_filter IS NULL THEN true ELSE skipq.topic_matches(v_filter, r.tags) END
          -- One probe of messages_message_id_queue_key per message (OFFSET 0
          -- keeps it one): as an anti join the planner read every message
          -- of the queue once per step and compared each with every
          -- retained one, so a step's time grew with the replay's progress
          -- (1,000 x 14,000 comparisons, 2.5 s, after 14 steps).
          AND NOT EXISTS (SELECT 1 FROM skipq.messages m WHERE m.message_id = r.message_id AND m.queue_id = q.id
                          OFFSET 0)
        ORDER BY r.id);
    IF cardinality(v_rows) > 0 THEN
        SELECT count(*), count(*) FILTER (WHERE m.delayed_to IS NULL) INTO v_copied, v_ready
        FROM skipq.message_insert(
            q.tenant, q.name, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT r.message_id FROM unnest(v_rows) r),
            array_fill(q.content_based_dedup, ARRAY[cardinality(v_rows)]),
            ARRAY(SELECT r.client_id FROM unnest(v_rows) r),
            ARRAY(SELECT r.metadata FROM unnest(v_rows) r),
            ARRAY(SELECT r.body_binary FROM unnest(v_rows) r),
            ARRAY(SELECT (r.tags || jsonb_build_object('skipq.topic', t.name, 'skipq.body', r.id::text))::text
                  FROM unnest(v_rows) r),
            array_fill(-1, ARRAY[cardinality(v_rows)]),
            ARRAY(SELECT r.expiration_seconds FROM unnest(v_rows) r),
            ARRAY(SELECT r.max_receive_count FROM unnest(v_rows) r),
            ARRAY(SELECT coalesce(r.dead_letter_queue, '') FROM unnest(v_rows) r),
            ARRAY(SELECT r.dead_letter_queue IS NOT NULL FROM unnest(v_rows) r),
            array_fill(1, ARRAY[cardinality(v_rows)]), array_fill(0, ARRAY[cardinality(v_rows)]), '\x'::bytea,
            CASE WHEN t.fifo THEN ARRAY(SELECT r.group_id FROM unnest(v_rows) r) END) m
        WHERE m.outcome IN ('sent', 'duplicate');
    END IF;
    IF v_final THEN
        DELETE FROM skipq.topic_replays x WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
    ELSE
        UPDATE skipq.topic_replays x SET replay_after = coalesce(v_last, s.replay_horizon)
        WHERE x.topic_id = s.topic_id AND x.queue_id = s.queue_id;
    END IF;
    RETURN QUERY SELECT q.id, v_copied, v_ready, NOT v_final;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_retention_prune(p_now timestamp with time zone, p_max integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_topic   bigint;
    v_removed integer := 0;
    v_n       integer;
BEGIN
-- Removes retained messages whose retention ended (the topic's
-- retainSeconds after their publish; all of a topic deleted or retaining
-- nothing now), at most p_max in all, oldest first per topic, never one a
-- replaying subscription has not been through yet. The bodies go with the
-- worker's skipq.topic_upkeep once no copy names them.
    FOR v_topic IN
        -- The topics that retain anything: a skip scan of the primary key.
        WITH RECURSIVE ids(id) AS (
            SELECT min(r.topic_id) FROM skipq.topic_retained r
            UNION ALL
            SELECT (SELECT min(r.topic_id) FROM skipq.topic_retained r WHERE r.topic_id > ids.id)
            FROM ids WHERE ids.id IS NOT NULL)
        SELECT ids.id FROM ids WHERE ids.id IS NOT NULL
    LOOP
        EXIT WHEN v_removed >= p_max;
        WITH doomed AS (
            SELECT w.id FROM (
                SELECT r.id, r.published_at FROM skipq.topic_retained r
                WHERE r.topic_id = v_topic ORDER BY r.id LIMIT p_max - v_removed) w
            WHERE w.published_at + make_interval(secs => coalesce(
                      (SELECT t.retain_seconds FROM skipq.topics t WHERE t.id = v_topic), 0)) <= p_now
              AND w.id <= coalesce((SELECT min(s.replay_after) FROM skipq.topic_replays s
                                    WHERE s.topic_id = v_topic), w.id)
        )
        DELETE FROM skipq.topic_retained r USING doomed d WHERE r.topic_id = v_topic AND r.id = d.id;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_removed := v_removed + v_n;
    END LOOP;
    RETURN v_removed;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_publish(p_tenant text, p_topic text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(pos integer, message_id text, outcome text, delivered_to integer, published_at timestamp with time zone, woken bigint[])
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    t         skipq.topics;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    v_hash    bytea[];
    v_outcome text[] := array_fill('sent'::text, ARRAY[n]);
    v_count   integer[] := array_fill(0, ARRAY[n]);
    v_at      timestamptz[] := array_fill(v_now, ARRAY[n]);
    v_woken   text[] := array_fill(''::text, ARRAY[n]);
    v_body_id bigint[];
    v_fresh   integer[];
    v_pos     integer[];
    v_first   integer;
    -- A position repeating an earlier one's key within the call: that
    -- position, whose result it answers with.
    v_dupof   integer[] := array_fill(NULL::integer, ARRAY[n]);
    b         skipq.topic_bodies;
    -- Per position: its tags as given (what filters read), and as each
    -- group's copy carries them.
    v_src     jsonb[];
    v_copy    jsonb[];
    -- The copies of the groups written together: queue ids and positions.
    v_fq      bigint[] := '{}';
    v_fx      integer[] := '{}';
    s         record;
    r         record;
    i         integer;
BEGIN
    SELECT * INTO t FROM skipq.topics WHERE tenant = p_tenant AND name = p_topic;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- A FIFO topic's messages name a group, a standard topic's none (its
    -- groups' queues are of its kind), as a send to a queue.
    IF (CASE WHEN t.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL) END) THEN
        RETURN QUERY
            SELECT x, p_message_ids[x], CASE WHEN t.fifo THEN 'group_required' ELSE 'group_refused' END,
                   0, NULL::timestamptz, NULL::bigint[]
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = t.fifo ORDER BY x;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(skipq.topic_lock_key(t.id));

    IF true = ANY(p_keyed) THEN
        -- Publishers of one key are serialized until commit (lock-number
        -- order: two batches cannot deadlock); a key's body row is the
        -- first publish's result for as long as it exists (its window, and
        -- while a copy is still in a group).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/' || p_message_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE p_keyed[x] ORDER BY 1) l;
        v_hash := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        FOR b IN
            SELECT * FROM skipq.topic_bodies d
            WHERE d.topic_id = t.id
              AND d.message_id = ANY(ARRAY(SELECT p_message_ids[x] FROM generate_subscripts(p_message_ids, 1) x
                                           WHERE p_keyed[x]))
        LOOP
            i := array_position(p_message_ids, b.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = b.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_count[i] := b.delivered_to; v_at[i] := b.published_at;
        END LOOP;
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT p_keyed[i];
            v_first := array_position(p_message_ids, p_message_ids[i]);
            CONTINUE WHEN v_first = i;
            v_outcome[i] := CASE WHEN v_hash[i] = v_hash[v_first] THEN 'duplicate' ELSE 'conflict' END;
            v_dupof[i] := v_first;
        END LOOP;
        IF 'conflict' = ANY(v_outcome) THEN
            RETURN QUERY
                SELECT x, p_message_ids[x], 'conflict'::text, 0, NULL::timestamptz, NULL::bigint[]
                FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'conflict' ORDER BY x;
            RETURN;
        END IF;
    END IF;

    v_fresh := ARRAY(SELECT x FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'sent' ORDER BY x);
    IF t.fifo AND t.retain_seconds > 0 THEN
        -- A replay goes by body id: publishers of one groupId draw their
        -- ids in the order they reach the groups (lock-number order).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/group/' || p_group_ids[x], 0) AS h
            FROM unnest(v_fresh) x ORDER BY 1) l;
    END IF;
    v_body_id := array_fill(NULL::bigint, ARRAY[n]);
    FOR i IN SELECT unnest(v_fresh) LOOP
        v_body_id[i] := nextval('skipq.topic_body_sequence');
    END LOOP;
    v_src := ARRAY(SELECT p_tags[x]::jsonb FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    v_copy := ARRAY(SELECT v_src[x] || jsonb_build_object('skipq.topic', t.name, 'skipq.body', v_body_id[x]::text)
                    FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    -- Each group in queue-id order, its matching messages. A group whose
    -- queue traces or deduplicates by content gets them through a send of
    -- its own (skipq.message_insert: trace ids and events, keys); the
    -- copies of all other groups are written below in one statement. This
    -- statement's snapshot comes after the shared lock: no subscription
    -- change is in flight.
    FOR s IN
        SELECT ts.queue_id, ts.filter, q.name, q.content_based_dedup,
               q.content_based_dedup OR EXISTS (SELECT 1 FROM skipq.queue_trace tr WHERE tr.queue_id = q.id)
                   AS alone
        FROM skipq.topic_subscriptions ts JOIN skipq.queues q ON q.id = ts.queue_id
        -- A subscription still replaying gets this publish from the
        -- retained messages (skipq.topic_replay), after the older ones.
        WHERE ts.topic_id = t.id
          AND NOT EXISTS (SELECT 1 FROM skipq.topic_replays rp WHERE rp.topic_id = ts.topic_id
                          AND rp.queue_id = ts.queue_id AND rp.created_at >= ts.created_at)
        ORDER BY ts.queue_id
    LOOP
        v_pos := CASE WHEN s.filter IS NULL THEN v_fresh
                      ELSE ARRAY(SELECT x FROM unnest(v_fresh) x
                                 WHERE skipq.topic_matches(s.filter, v_src[x]) ORDER BY x) END;
        CONTINUE WHEN cardinality(v_pos) = 0;
        IF NOT s.alone THEN
            v_fq := v_fq || array_fill(s.queue_id, ARRAY[cardinality(v_pos)]);
            v_fx := v_fx || v_pos;
            CONTINUE;
        END IF;
        FOR r IN
            SELECT * FROM skipq.message_insert(
                p_tenant, s.name, v_now, p_server_max_receive_count,
                ARRAY(SELECT p_message_ids[x] FROM unnest(v_pos) x),
                -- A queue that deduplicates by content would take every
                -- empty body for the same: its copies are keyed by id.
                array_fill(s.content_based_dedup, ARRAY[cardinality(v_pos)]),
                ARRAY(SELECT p_client_ids[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_metadatas[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_body_binaries[x] FROM unnest(v_pos) x),
                ARRAY(SELECT v_copy[x]::text FROM unnest(v_pos) x),
                ARRAY(SELECT p_delay_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_expiration_seconds[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_max_receive_counts[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queues[x] FROM unnest(v_pos) x),
                ARRAY(SELECT p_dead_letter_queue_given[x] FROM unnest(v_pos) x),
                array_fill(1, ARRAY[cardinality(v_pos)]), array_fill(0, ARRAY[cardinality(v_pos)]), '\x'::bytea,
                CASE WHEN t.fifo THEN ARRAY(SELECT p_group_ids[x] FROM unnest(v_pos) x) END,
                NULL,
                CASE WHEN p_key_ids IS NOT NULL THEN ARRAY(SELECT p_key_ids[x] FROM unnest(v_pos) x) END) m
        LOOP
            IF r.queue_id <> s.queue_id THEN
                -- The subscribed queue was deleted and one of its name
                -- created after this statement read the subscriptions:
                -- that queue did not subscribe.
                RAISE EXCEPTION 'skipq: queue % was re-created during a publish', s.name
                    USING ERRCODE = '40001';
            END IF;
            CONTINUE WHEN r.outcome NOT IN ('sent', 'duplicate');
            i := v_pos[r.pos];
            v_count[i] := v_count[i] + 1;
            IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
                v_woken[i] := v_woken[i] || ',' || s.queue_id::text;
            END IF;
        END LOOP;
    END LOOP;

    IF cardinality(v_fx) > 0 THEN
        -- The other groups' copies, one insert for all: a send's insert
        -- (skipq.message_insert's, with each queue's defaults) of empty
        -- bodies, its sequences drawn group by group in position order
        -- after the FIFO groups' locks (skipq.group_enter, in lock-number
        -- order). A queue deleted since the subscriptions were read gets
        -- nothing (the join), as a send to a missing queue.
        IF t.fifo THEN
            PERFORM skipq.group_enter(v_fq, ARRAY(SELECT p_group_ids[f.x] FROM unnest(v_fx) WITH ORDINALITY AS f(x, k)
                                                 ORDER BY f.k));
        END IF;
        WITH inserted AS (
            INSERT INTO skipq.messages AS msg (
                queue_id, message_id, client_id, metadata, body, body_binary, tags,
                sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready, group_id)
            SELECT q.id, p_message_ids[f.x], p_client_ids[f.x], p_metadatas[f.x], '\x'::bytea,
                   p_body_binaries[f.x], v_copy[f.x],
                   v_now,
                   v_now + make_interval(secs => p.delay_seconds),
                   CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
                   CASE WHEN p.expiration_seconds > 0
                        THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
                   p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0, p_group_ids[f.x]
            -- Each queue looked up once, its copies' positions beside it.
            FROM skipq.queues q
            CROSS JOIN LATERAL (SELECT u.q, u.x FROM unnest(v_fq, v_fx) AS u(q, x) WHERE u.q = q.id) f
            CROSS JOIN LATERAL (SELECT
                CASE WHEN p_delay_seconds[f.x] < 0 THEN q.delay_seconds ELSE p_delay_seconds[f.x] END AS delay_seconds,
                CASE WHEN p_expiration_seconds[f.x] < 0 THEN q.expiration_seconds ELSE p_expiration_seconds[f.x] END
                    AS expiration_seconds,
                CASE WHEN p_max_receive_counts[f.x] > 0 THEN p_max_receive_counts[f.x]
                     WHEN q.max_receive_count > 0 THEN q.max_receive_count
                     ELSE p_server_max_receive_count END AS max_receive_count,
                CASE WHEN p_dead_letter_queue_given[f.x] THEN p_dead_letter_queues[f.x] ELSE q.dead_letter_queue END
                    AS dead_letter_queue
            ) p
            WHERE q.id = ANY(v_fq)
            ORDER BY f.q, f.x
            RETURNING msg.queue_id, msg.message_id, msg.sequence, msg.visible_at, msg.ready
        ), readied AS (
            INSERT INTO skipq.ready (queue_id, sequence)
            SELECT w.queue_id, w.sequence FROM inserted w WHERE w.ready
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT w.visible_at, w.queue_id, w.sequence FROM inserted w WHERE NOT w.ready
        ), per_message AS (
            -- A fresh position's message id is its own (no two share one).
            SELECT w.message_id, count(*)::integer AS groups,
                   coalesce(string_agg(',' || w.queue_id::text, '' ORDER BY w.queue_id) FILTER (WHERE w.ready), '')
                       AS woken
            FROM inserted w GROUP BY w.message_id
        )
        SELECT array_agg(v_count[x] + coalesce(c.groups, 0) ORDER BY x),
               array_agg(v_woken[x] || coalesce(c.woken, '') ORDER BY x)
        INTO v_count, v_woken
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN per_message c ON v_outcome[x] = 'sent' AND c.message_id = p_message_ids[x];
    END IF;

    FOR i IN 1 .. n LOOP
        IF v_dupof[i] IS NOT NULL THEN
            v_count[i] := v_count[v_dupof[i]]; v_at[i] := v_at[v_dupof[i]];
        END IF;
    END LOOP;

    -- The bodies, once each: of the messages some group got, of keyed
    -- ones (their key answers a second publish even when nothing matched),
    -- and of every one a topic retains.
    INSERT INTO skipq.topic_bodies (id, topic_id, message_id, content_hash, body, published_at, window_ends,
                                    delivered_to)
    SELECT v_body_id[x], t.id, p_message_ids[x], CASE WHEN p_keyed[x] THEN v_hash[x] END,
           substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]), v_now,
           v_now + make_interval(secs => t.dedup_window_seconds), v_count[x]
    FROM unnest(v_fresh) x
    WHERE v_count[x] > 0 OR p_keyed[x] OR t.retain_seconds > 0;
    IF t.retain_seconds > 0 THEN
        -- What a replay sends again: the message as published.
        INSERT INTO skipq.topic_retained (topic_id, id, message_id, published_at, client_id, metadata,
                                          body_binary, tags, group_id, expiration_seconds, max_receive_count,
                                          dead_letter_queue)
        SELECT t.id, v_body_id[x], p_message_ids[x], v_now, p_client_ids[x], p_metadatas[x], p_body_binaries[x],
               v_src[x], p_group_ids[x], p_expiration_seconds[x], p_max_receive_counts[x],
               CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] END
        FROM unnest(v_fresh) x ORDER BY x;
    END IF;
    IF cardinality(v_fresh) > 0 THEN
        INSERT INTO skipq.topic_counts (topic_id, published, delivered, unrouted)
        SELECT t.id, count(*), sum(v_count[x]), count(*) FILTER (WHERE v_count[x] = 0)
        FROM unnest(v_fresh) x;
    END IF;

    RETURN QUERY
    SELECT x, p_message_ids[x], v_outcome[x], v_count[x], v_at[x],
           CASE WHEN v_woken[x] = '' THEN '{}'::bigint[] ELSE string_to_array(substr(v_woken[x], 2), ',')::bigint[] END
    FROM generate_subscripts(p_message_ids, 1) x ORDER BY x;
END $$;
-- +goose StatementEnd
