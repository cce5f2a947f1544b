-- +goose Up
-- The worker fires a batch of due timers in one call, skipq.message_fire,
-- instead of three statements of its own (lock the due messages, ready
-- them, file again the timers of those passed over). Two reasons:
--
-- Plans. The three joined the timers' keys to skipq.messages by key. On
-- the statistics of a table just drained (one row over a thousand pages,
-- after the autovacuum that follows a drain), the lock was planned as a
-- walk of every message of every queue with the keys as a join filter,
-- and a probe by key as a walk of messages_queue_sent_idx over all of a
-- queue's messages (sequence is its third column): O(table) a batch until
-- the next analyze. Here each message is found by skipq.message_rows (00043:
-- a probe that only the primary key serves), and named by its address
-- afterwards, a TID scan being the only plan of those statements.
--
-- Timers filed again every second. A timer whose message was not locked
-- was filed again a second later whatever the reason, so the first timer
-- of a message whose lease had been extended (the extend files a timer of
-- its own) came back every second until the extended lease ended: a probe
-- a second for every extended message. Now only a message that was due
-- and that another transaction held has its timer filed again.
-- +goose StatementBegin
CREATE FUNCTION skipq.message_fire(p_queue_ids bigint[], p_sequences bigint[], p_now timestamptz,
                                   p_retry_seconds integer)
RETURNS TABLE(queue_id bigint, sequence bigint, exhausted boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_sort = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now    timestamptz := coalesce(p_now, now());
    v_due    tid[];
    v_locked tid[];
BEGIN
    -- Fires the timers the worker took (p_queue_ids, p_sequences: their
    -- messages): of the messages still waiting for that moment (not ready,
    -- visible now, not expired; a settled message is simply gone, an
    -- extended lease filed a timer of its own), locks those no other
    -- transaction holds and readies the ones with deliveries left, and
    -- files again, p_retry_seconds later, the timers of those it had to
    -- pass over. Returns the messages locked: readied (exhausted false) or
    -- on their last allowed delivery, for the caller to dead-letter in the
    -- same transaction (exhausted true).
    --
    -- Each timer's message by skipq.message_rows (a probe of its key that
    -- only the primary key serves), then read by address: a join by key,
    -- planned on the statistics of a drained table, walked every message.
    -- A message with two timers in the batch is one address.
    SELECT array_agg(m.ctid) INTO v_due
    FROM skipq.messages m
    WHERE m.ctid = ANY(ARRAY(SELECT r.address FROM skipq.message_rows(p_queue_ids, p_sequences) r))
      AND NOT m.ready AND m.visible_at <= v_now AND (m.expires_at IS NULL OR m.expires_at > v_now);
    IF v_due IS NULL THEN
        RETURN;
    END IF;
    -- Locked by address, SKIP LOCKED: a message that another transaction
    -- holds (an ack inside a consumer's own SQL transaction, which may take
    -- long) is passed over instead of stalling the worker for every queue.
    -- A row changed since is followed to its newest version, on which the
    -- WHERE is checked again (an extend that committed meanwhile leaves it
    -- not due); its address is then the newest version's, which cannot
    -- change while this transaction holds it.
    SELECT array_agg(m.ctid) INTO v_locked
    FROM (SELECT m.ctid FROM skipq.messages m
          WHERE m.ctid = ANY(v_due)
            AND NOT m.ready AND m.visible_at <= v_now AND (m.expires_at IS NULL OR m.expires_at > v_now)
          FOR UPDATE SKIP LOCKED) m;
    IF coalesce(cardinality(v_locked), 0) < cardinality(v_due) THEN
        -- Those passed over that are still there (a new snapshot: one that
        -- was settled or changed meanwhile is not at its old address any
        -- more) come back when their holder lets go: their timer is filed
        -- again. Not a retained message (the empty lease token), which
        -- never comes back.
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT v_now + make_interval(secs => p_retry_seconds), m.queue_id, m.sequence
        FROM skipq.messages m
        WHERE m.ctid = ANY(v_due) AND NOT (m.ctid = ANY(coalesce(v_locked, '{}')))
          AND NOT m.ready AND m.lease_token IS DISTINCT FROM '\x'::bytea;
    END IF;
    IF v_locked IS NULL THEN
        RETURN;
    END IF;
    -- The lease token stays: the receiver whose lease ran out may still
    -- settle the message until it is claimed again. A token means a lease
    -- ran out (a nack clears it; delayed messages never had one): that is
    -- the message's last failure, in its tags.
    RETURN QUERY
    WITH readied AS (
        UPDATE skipq.messages m
        SET ready = true,
            tags = CASE WHEN m.lease_token IS NULL THEN m.tags
                        ELSE m.tags || jsonb_build_object('skipq.failure', skipq.failure_doc('lease_expired', NULL,
                                 v_now, m.receive_count)::text) END
        WHERE m.ctid = ANY(v_locked) AND m.receive_count < m.max_receive_count
        RETURNING m.queue_id, m.sequence, m.message_id, m.tags, m.lease_token IS NOT NULL AS expired
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at)
        SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'lease_expired', v_now
        FROM readied r WHERE r.expired AND r.tags ? 'skipq.trace'
    ), queued AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT r.queue_id, r.sequence FROM readied r
    )
    SELECT r.queue_id, r.sequence, false FROM readied r
    UNION ALL
    SELECT m.queue_id, m.sequence, true FROM skipq.messages m
    WHERE m.ctid = ANY(v_locked) AND m.receive_count >= m.max_receive_count;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_fire(bigint[], bigint[], timestamptz, integer) FROM PUBLIC;

-- +goose Down
DROP FUNCTION skipq.message_fire(bigint[], bigint[], timestamptz, integer);
