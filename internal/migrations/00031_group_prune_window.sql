-- +goose Up
-- skipq.group_prune walked every row of skipq.message_groups each time the
-- worker ran it (every 30 s) whenever fewer than p_max groups were empty:
-- one probe of the messages per group, a million probes a run on a
-- database with a million groups. This one looks at a window of p_scan
-- groups after a cursor (the primary key's order) and returns where the
-- next call goes on: the worker walks the table a window per run, and
-- wraps around at its end. It prunes up to p_max empty groups of the
-- window, in key order; when it prunes p_max, the cursor stops at the last
-- one pruned, so a window full of empty groups (a purged FIFO queue) is
-- pruned to the end by the calls that follow at once. The previous
-- signature stays for the nodes of the previous release (drop it in the
-- next).
-- +goose StatementBegin
CREATE FUNCTION skipq.group_prune(p_max integer, p_scan integer, p_after_queue_id bigint, p_after_group_id text,
                                  OUT pruned integer, OUT next_queue_id bigint, OUT next_group_id text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
-- The window is a range of the primary key, walked in its order.
SET enable_seqscan = off SET enable_sort = off
SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
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
REVOKE ALL ON FUNCTION skipq.group_prune(integer, integer, bigint, text) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.group_prune(integer, integer, bigint, text);
