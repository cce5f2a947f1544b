-- +goose Up
-- A timer for several messages of one queue that come due together: the
-- first release of two. A claim of 100 writes 100 timers today (9–10 % of
-- its instructions, 4 buffers and 2 WAL records a message); a claim that
-- wrote one row for all of them would lose them to a worker of this
-- release's predecessor, which takes only skipq.timers. So this release's
-- worker takes due sets as well as single timers, and nothing writes sets
-- yet; the next release's claims write them, when no running worker can
-- miss them. A new table rather than a column on skipq.timers: ADD COLUMN
-- takes an ACCESS EXCLUSIVE lock on a table every claim inserts into.
CREATE TABLE skipq.timer_sets (
    due_at    timestamptz NOT NULL,
    queue_id  bigint      NOT NULL,
    sequences bigint[]    NOT NULL
) WITH (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_cost_delay = 0,
    -- As skipq.timers: it empties and refills all the time.
    vacuum_truncate = false
);

-- The worker takes due sets oldest first.
CREATE INDEX timer_sets_due_at_idx ON skipq.timer_sets (due_at);

-- The worker sleeps until the earliest timer of either table.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.timer_wait(p_now timestamp with time zone, p_cap double precision) RETURNS double precision
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    v_next timestamptz;
BEGIN
    SELECT least((SELECT t.due_at FROM skipq.timers t ORDER BY t.due_at LIMIT 1),
                 (SELECT s.due_at FROM skipq.timer_sets s ORDER BY s.due_at LIMIT 1))
    INTO v_next;
    RETURN greatest(0, least(p_cap, coalesce(extract(epoch FROM v_next - coalesce(p_now, now()))::double precision, p_cap)));
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.timer_wait(p_now timestamp with time zone, p_cap double precision) RETURNS double precision
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    v_next timestamptz;
BEGIN
    SELECT t.due_at INTO v_next FROM skipq.timers t ORDER BY t.due_at LIMIT 1;
    RETURN greatest(0, least(p_cap, coalesce(extract(epoch FROM v_next - coalesce(p_now, now()))::double precision, p_cap)));
END $$;
-- +goose StatementEnd
DROP TABLE skipq.timer_sets;
