-- +goose Up
-- A message's state as the API reports it (SPEC §4): the one definition,
-- used by queue stats, the gauge snapshot, browse and lookup. States are
-- exclusive: available (visible now, deliveries left), delayed (never
-- leased, visible later) and in flight (leased, or out of deliveries until
-- the worker dead-letters it). A plain IMMUTABLE SQL function: the planner
-- inlines it into each query, so it costs what the CASE written in place
-- cost, and takes the columns, not the row (a whole-row argument would
-- build the row, body included, for every message). It pins no search_path
-- as every other skipq function does: a SET clause stops the inlining. It
-- runs with its caller's rights and names only pg_catalog's operators on
-- builtin types, which pg_catalog (searched first) resolves.
CREATE FUNCTION skipq.message_state(
    p_visible_at timestamptz, p_receive_count integer, p_max_receive_count integer,
    p_lease_token bytea, p_now timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_visible_at <= p_now AND p_receive_count < p_max_receive_count THEN 'available'
        WHEN p_lease_token IS NULL AND p_visible_at > p_now THEN 'delayed'
        ELSE 'in_flight' END
$$;
REVOKE ALL ON FUNCTION skipq.message_state(timestamptz, integer, integer, bytea, timestamptz) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.message_state(timestamptz, integer, integer, bytea, timestamptz);
