-- +goose Up
-- The statements of a receive and of the settles that keep a lease (ack,
-- extend) become functions, their SQL as it was in queries/messages.sql:
-- a function carries the plan settings (db/pool.go) with it, so a call
-- needs nothing piped ahead of it, and PL/pgSQL caches its plans for the
-- server connection, so a call costs no planning even where the driver
-- cannot keep prepared statements (PgBouncer in transaction mode): planning
-- the claim took 0.4-0.5 ms, twice its execution. Each returns the rows it
-- took as they are now (skipq.messages), so sqlc types the calls; a caller
-- reads the columns it needs.
--
-- The claims read the time with clock_timestamp(), during the statement,
-- not now(): now() is when the call began, and the statement inside takes
-- its snapshot later, so it can see -- and deliver -- a message that a
-- commit in between made available, and would then date the delivery (its
-- lease, its expiry check) before that commit: make chaos caught a
-- delivery dated 5 ms before its delay ended.
--
-- plan_cache_mode = force_generic_plan: every statement here has a shape
-- whose only plan under the plan settings is the intended one (the claim's
-- LATERAL probes, the settles' per-row queue check), so a plan made once
-- serves every call. Left to choose, the plan cache kept planning the ack
-- afresh on each call (custom plans looked cheaper for arrays of known
-- length): 0.5 ms per ack of a few handles, 0.2 ms with the generic plan.
-- skipq.message_insert and skipq.timer_wait (migrations 00009, 00010) get
-- the same setting.


-- Claims up to p_max_messages available messages, oldest sequence first, for
-- p_visibility_seconds (NULL: the queue's default), within the response
-- budget. The queue is resolved by name in an InitPlan, so a receive is one
-- round trip.
--
-- `walked` walks skipq.ready, which holds only the messages a claim may
-- take, so the walk reads what it returns plus dead entries of recent claims
-- until VACUUM -- never the delayed or leased messages of the queue, however
-- many. The shape pins the plan whatever the statistics say: the ready
-- rows in key order drive a LATERAL probe of each message by its whole
-- primary key (a unique probe is the cheapest plan under any statistics).
-- Written as a plain join, the planner -- with statistics taken while the
-- queue was drained, `ready` looking never true -- drove it from the
-- messages' key, or scanned the whole key once per ready row: claims of 100
-- took 60-100 ms under load, against 2 ms for this plan. It locks the messages themselves (FOR UPDATE OF c SKIP LOCKED):
-- concurrent receivers pass each other's rows instead of queueing behind
-- them, and a message is always locked before its ready row is deleted (the
-- lock order of every statement, docs/DESIGN.md). `c.ready` is re-checked on
-- the newest version when a concurrent claim committed after this
-- statement's snapshot, so no message is taken twice. The claim then
-- updates only unindexed columns (a HOT update), deletes the ready rows, and
-- files a timer at the lease's end, when the worker readies the message
-- again -- or dead-letters it, if that was its last allowed delivery --
-- unless it was settled first. Each claim mints a fresh lease token (two
-- strong random UUIDs: 244 random bits), so older receipt handles go stale.
--
-- The response budget (here, in MessageClaimAndDelete and in MessagePeek):
-- a receive stops taking messages when its answer would pass
-- p_max_response_bytes (SKIPQ_MAX_RESPONSE_BYTES). Of the rows the walk took,
-- in sequence order, a row is kept while the estimated size of the rows
-- before it is under the budget, and the first row always, so at least one
-- message is returned however large. The walk's other rows are locked only
-- for this statement (autocommit) and never leased: they stay ready for the
-- next receive. One message's estimate is the size of its JSON without
-- escaping: the body (base64, 4/3 of it, when binary), metadata, tags as
-- JSON text, messageId, clientId and reRoutedFrom, plus p_message_overhead
-- for the fixed fields (names, timestamps, receipt handle, queue name),
-- which the caller computes; service.EstimatedMessageBytes is the same sum
-- in Go. octet_length of a bytea or text reads the raw size from the TOAST
-- pointer without detoasting (a 1 MiB body costs no TOAST page);
-- pg_column_size would be as cheap but gives the compressed size, which
-- understates. tags::text does detoast, but tags are small (at most
-- 32 x 1 KiB). LockRows does not keep the walk's order as far as the planner
-- knows, so the window sorts its at most p_max_messages (sequence, size)
-- pairs again: a small in-memory sort above the LIMIT.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_claim(p_tenant text, p_queue text, p_now timestamptz, p_visibility_seconds integer, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint)
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH t AS (
        SELECT coalesce(p_now, clock_timestamp()) AS now,
               coalesce(p_visibility_seconds,
                        (SELECT q.visibility_seconds FROM skipq.queues q
                         WHERE q.tenant = p_tenant AND q.name = p_queue)) AS visibility_seconds
    ), walked AS (
        SELECT c.queue_id, c.sequence, c.size
        FROM (SELECT r.queue_id, r.sequence FROM skipq.ready r
              WHERE r.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
              ORDER BY r.sequence) r
        CROSS JOIN LATERAL (
            SELECT c.queue_id, c.sequence,
                   CASE WHEN c.body_binary THEN (octet_length(c.body)::bigint + 2) / 3 * 4
                             ELSE octet_length(c.body)::bigint END
                        + octet_length(c.metadata) + octet_length(c.tags::text) + octet_length(c.message_id)
                        + octet_length(c.client_id) + coalesce(octet_length(c.re_routed_from), 0)
                        + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = r.queue_id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > coalesce(p_now, clock_timestamp()))
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    ), picked AS (
        SELECT w.queue_id, w.sequence FROM (
            SELECT w.queue_id, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM walked w
            WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n = 1 OR w.before < p_max_response_bytes
    ), unready AS (
        -- Ready rows are deleted by primary-key probes that the plan cannot turn
        -- around, never by a join: joined to a CTE, the planner may walk the
        -- whole ready table once per row of the CTE (measured: 30 ms for a claim
        -- of 100 behind 1,100 ready rows). Here, one queue and `sequence =
        -- ANY(...)`: both index conditions. Where the rows may span queues, a
        -- LATERAL probe per row collects their ctids (a Tid scan deletes them);
        -- nobody else can delete them meanwhile, as their messages are locked.
        DELETE FROM skipq.ready r
        WHERE r.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
          AND r.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT t.now + make_interval(secs => t.visibility_seconds), p.queue_id, p.sequence
        FROM picked p, t
    )
    UPDATE skipq.messages m
    SET visible_at        = t.now + make_interval(secs => t.visibility_seconds),
        receive_count     = m.receive_count + 1,
        first_received_at = coalesce(m.first_received_at, t.now),
        lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
        ready             = false
    FROM t
    WHERE m.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
      AND m.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
    RETURNING m.*;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_claim(text, text, timestamptz, integer, integer, bigint, bigint) FROM PUBLIC;

-- autoAck receive: claims like MessageClaim (the same walk and response
-- budget) and removes what it returns, with its ready rows, in the same
-- statement. receive_count is reported as this delivery's count.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_claim_and_delete(p_tenant text, p_queue text, p_now timestamptz, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint)
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH walked AS (
        SELECT c.queue_id, c.sequence, c.size
        FROM (SELECT r.queue_id, r.sequence FROM skipq.ready r
              WHERE r.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
              ORDER BY r.sequence) r
        CROSS JOIN LATERAL (
            SELECT c.queue_id, c.sequence,
                   CASE WHEN c.body_binary THEN (octet_length(c.body)::bigint + 2) / 3 * 4
                             ELSE octet_length(c.body)::bigint END
                        + octet_length(c.metadata) + octet_length(c.tags::text) + octet_length(c.message_id)
                        + octet_length(c.client_id) + coalesce(octet_length(c.re_routed_from), 0)
                        + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = r.queue_id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > coalesce(p_now, clock_timestamp()))
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    ), picked AS (
        SELECT w.queue_id, w.sequence FROM (
            SELECT w.queue_id, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM walked w
            WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n = 1 OR w.before < p_max_response_bytes
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
          AND r.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
    )
    DELETE FROM skipq.messages m
    WHERE m.queue_id = (SELECT q.id FROM skipq.queues q WHERE q.tenant = p_tenant AND q.name = p_queue)
      AND m.sequence = ANY(ARRAY(SELECT p.sequence FROM picked p))
    RETURNING m.*;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_claim_and_delete(text, text, timestamptz, integer, bigint, bigint) FROM PUBLIC;

-- Every settle returns the token it matched, so the caller credits exactly
-- the handle that settled the row (not a stale handle naming the same row),
-- and checks that the queue still exists: a message that a send racing a
-- queue deletion left behind (QueueDelete) is never settled, and the worker
-- removes it (MessageDeleteOrphaned).
-- Every statement that deletes messages also deletes the ready rows of those
-- that were ready (a leased message usually is not; one whose lease ran out
-- and that the worker readied is), after the message row: the lock order of
-- every statement (docs/DESIGN.md, "The claim").
-- `EXISTS (... OFFSET 0)` stays a per-row check: pulled up into a join
-- with the queues, it let a generic plan on statistics taken while the
-- queue was drained probe the messages by queue_id alone and filter on the
-- rest (50 ms for an ack of 100 under load). As written, the only plan is
-- a probe of each handle's full primary key (0.4 ms for 100, stale
-- statistics or not).
-- +goose StatementBegin
CREATE FUNCTION skipq.message_ack(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[])
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH gone AS (
        DELETE FROM skipq.messages m
        USING (SELECT unnest(p_queue_ids::bigint[]) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM gone g
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence) x WHERE g.ready))
    )
    SELECT gone.* FROM gone;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_ack(bigint[], bigint[], bytea[]) FROM PUBLIC;

-- Each lease now ends its p_visibility_seconds (>= 1, one per handle: a
-- shared statement carries several requests' extends) from now; the handle stays
-- valid, and a timer at the new end readies the message (or dead-letters a
-- last allowed delivery) if nobody settles it first. A message whose lease
-- had run out and that the worker already readied is taken off the ready
-- table again. (A release, visibility 0, is a nack.)
-- +goose StatementBegin
CREATE FUNCTION skipq.message_set_visibility(p_now timestamptz, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_visibility_seconds integer[])
RETURNS SETOF skipq.messages
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH extended AS (
        UPDATE skipq.messages m
        SET visible_at = t.now + make_interval(secs => k.seconds),
            ready = false
        FROM (SELECT coalesce(p_now, now()) AS now) t,
             (SELECT unnest(p_queue_ids::bigint[]) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token, unnest(p_visibility_seconds) AS seconds) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
        RETURNING m.*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM extended e
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = e.queue_id AND y.sequence = e.sequence) x))
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT e.visible_at, e.queue_id, e.sequence FROM extended e
    )
    SELECT extended.* FROM extended;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_set_visibility(timestamptz, bigint[], bigint[], bytea[], integer[]) FROM PUBLIC;

ALTER FUNCTION skipq.message_insert(text, text, timestamptz, integer, text[], boolean[], text[], text[],
    boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION skipq.timer_wait(timestamptz, double precision) SET plan_cache_mode = force_generic_plan;

-- +goose Down
ALTER FUNCTION skipq.message_insert(text, text, timestamptz, integer, text[], boolean[], text[], text[],
    boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea)
    RESET plan_cache_mode;
ALTER FUNCTION skipq.timer_wait(timestamptz, double precision) RESET plan_cache_mode;
DROP FUNCTION skipq.message_claim(text, text, timestamptz, integer, integer, bigint, bigint);
DROP FUNCTION skipq.message_claim_and_delete(text, text, timestamptz, integer, bigint, bigint);
DROP FUNCTION skipq.message_ack(bigint[], bigint[], bytea[]);
DROP FUNCTION skipq.message_set_visibility(timestamptz, bigint[], bigint[], bytea[], integer[]);
