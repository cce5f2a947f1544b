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
-- Signatures and meanings are unchanged: the previous release calls both.
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
