-- +goose Up
-- skipq.timer_wait: the worker's probe of the timers (service.FireTimers),
-- seconds until the earliest timer is due (0: one is due now; p_cap when
-- there is none or it is further away). One descent of the due_at index.
-- A function so that its plan settings travel with it (db/pool.go's, on the
-- function): the probe runs about once a second on every worker, idle or
-- not, and without them it would need a second statement piped ahead of it
-- -- half of an idle node's statements.
-- +goose StatementBegin
CREATE FUNCTION skipq.timer_wait(p_now timestamptz, p_cap double precision) RETURNS double precision
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
AS $$
DECLARE
    v_next timestamptz;
BEGIN
    SELECT t.due_at INTO v_next FROM skipq.timers t ORDER BY t.due_at LIMIT 1;
    RETURN greatest(0, least(p_cap, coalesce(extract(epoch FROM v_next - coalesce(p_now, now()))::double precision, p_cap)));
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.timer_wait(timestamptz, double precision) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.timer_wait(timestamptz, double precision);
