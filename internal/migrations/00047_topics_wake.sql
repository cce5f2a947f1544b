-- +goose Up
-- The claims of several queues in one statement, a topic copy's stored
-- body read beside it (skipq.message_claim_queues): a publish wakes a
-- receiver on each of its groups at once, and a claim statement per queue
-- and a body read per receive made the median of ten receivers wait for
-- about three rounds of claims (docs/PERFORMANCE.md, "Topics: wake-ups of
-- every group, and a replay of 1,000,000"). A new function: nodes of the
-- previous release do not call it.
--
-- And a replay step checks each retained message against its queue with
-- one index probe: as an anti join, the planner read every message the
-- replay had sent so far once per step, so steps grew longer as a replay
-- went on (2.5 s for 1,000 after 14,000). It evaluates a subscription's
-- filter only when it has one (skipq.topic_publish already did): the call
-- of skipq.topic_matches for every retained message, a function with
-- settings that is never inlined, was about a quarter of a step of 1,000.
-- Only the function's body changes.

-- +goose StatementBegin
CREATE FUNCTION skipq.message_claim_queues(p_now timestamptz, p_tenants text[], p_queues text[],
    p_max_messages integer[], p_visibility_seconds integer[], p_key_ids bigint[], p_max_response_bytes bigint[],
    p_message_overheads bigint[])
RETURNS TABLE(claim integer, queue_id bigint, sequence bigint, message_id text, client_id text, metadata text,
              body bytea, body_binary boolean, tags jsonb, sent_at timestamptz, visible_at timestamptz,
              delayed_to timestamptz, expires_at timestamptz, receive_count integer, first_received_at timestamptz,
              max_receive_count integer, dead_letter_queue text, re_routed_from text, dead_lettered_at timestamptz,
              lease_token bytea, ready boolean, group_id text)
LANGUAGE sql SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
    SET jit = off AS $$
    -- Claim i takes up to p_max_messages[i] of queue p_queues[i] as
    -- skipq.message_claim does (at most one message of a FIFO group),
    -- under p_key_ids[i]; rows in claim order, each claim's in answer
    -- order. A topic copy comes with its stored body in place of its
    -- empty one and without the tag that named it (one primary-key probe
    -- of skipq.topic_bodies: the settings keep the planner from joining
    -- the whole table); a copy whose body is gone keeps both.
    SELECT k.claim::integer, m.queue_id, m.sequence, m.message_id, m.client_id, m.metadata,
           coalesce(b.body, m.body), m.body_binary,
           CASE WHEN b.body IS NULL THEN m.tags ELSE m.tags - 'skipq.body' END,
           m.sent_at, m.visible_at, m.delayed_to, m.expires_at, m.receive_count, m.first_received_at,
           m.max_receive_count, m.dead_letter_queue, m.re_routed_from, m.dead_lettered_at, m.lease_token, m.ready,
           m.group_id
    FROM unnest(p_tenants, p_queues, p_max_messages, p_visibility_seconds, p_key_ids, p_max_response_bytes,
                p_message_overheads)
             WITH ORDINALITY AS k(tenant, queue, max_messages, visibility_seconds, key_id, max_response_bytes,
                                  message_overhead, claim)
    CROSS JOIN LATERAL skipq.message_claim(k.tenant, k.queue, p_now, k.visibility_seconds, k.max_messages,
        k.max_response_bytes, k.message_overhead, k.key_id, 1, 'claim') WITH ORDINALITY AS m
    LEFT JOIN LATERAL (SELECT d.body FROM skipq.topic_bodies d
                       WHERE m.tags ? 'skipq.body' AND d.id = (m.tags ->> 'skipq.body')::bigint) b ON true
    ORDER BY k.claim, m.ordinality
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_claim_queues(timestamptz, text[], text[], integer[], integer[], bigint[],
    bigint[], bigint[]) FROM PUBLIC;

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

-- +goose Down
DROP FUNCTION skipq.message_claim_queues(timestamptz, text[], text[], integer[], integer[], bigint[],
    bigint[], bigint[]);

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
        WHERE r.published_at >= s.replay_from AND skipq.topic_matches(v_filter, r.tags)
          AND NOT EXISTS (SELECT 1 FROM skipq.messages m WHERE m.message_id = r.message_id AND m.queue_id = q.id)
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
