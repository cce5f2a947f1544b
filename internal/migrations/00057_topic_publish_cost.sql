-- +goose Up
-- A topic publish's fixed cost: fewer statements a call, the same rows,
-- locks and writes. Each statement plpgsql runs through the executor costs
-- its start-up (tens of thousands of instructions); an expression without
-- a subquery is evaluated directly. So:
--
-- - the check that the messages name a group as the topic's kind asks is
--   an expression (array_remove), not an EXISTS over the group ids;
-- - the fresh positions, their body ids, and each position's tags as given
--   and as a copy carries them are one statement, where they were four
--   statements and a nextval() a position (a FIFO topic that retains still
--   takes its groups' locks before the ids are drawn);
-- - an unfiltered subscription's positions are assigned, where a CASE with
--   a subquery ran a statement for every subscription;
-- - the pass that copies a repeated key's result runs for keyed publishes
--   only;
-- - the topic's shared lock is taken on skipq.topic_lock_key's key written
--   out: the function, SQL with a search_path setting, is never inlined and
--   ran an executor of its own (subscribe, unsubscribe and replay still
--   call it; the tests of a publish waiting for an open subscribe and the
--   reverse fail if the two keys part).
--
-- Same signature. The Down restores the previous body.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.topic_publish(p_tenant text, p_topic text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_key_ids bigint[] DEFAULT NULL::bigint[]) RETURNS TABLE(pos integer, message_id text, outcome text, delivered_to integer, published_at timestamp with time zone, woken bigint[])
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    t         skipq.topics;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    v_keyed   boolean := true = ANY(p_keyed);
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
    -- (An expression without a subquery: plpgsql evaluates it without
    -- starting an executor.)
    IF (CASE WHEN t.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE cardinality(array_remove(p_group_ids, NULL)) > 0 END) THEN
        RETURN QUERY
            SELECT x, p_message_ids[x], CASE WHEN t.fifo THEN 'group_required' ELSE 'group_refused' END,
                   0, NULL::timestamptz, NULL::bigint[]
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = t.fifo ORDER BY x;
        RETURN;
    END IF;
    -- skipq.topic_lock_key's key, written out: that function (SQL with its
    -- own search_path, so never inlined) would start an executor of its own.
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('topic/' || t.id::text, 0));

    IF v_keyed THEN
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

    -- The fresh positions are those still 'sent'.
    IF t.fifo AND t.retain_seconds > 0 THEN
        -- A replay goes by body id: publishers of one groupId draw their
        -- ids in the order they reach the groups (lock-number order).
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended('topic/' || t.id::text || '/group/' || p_group_ids[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'sent' ORDER BY 1) l;
    END IF;
    -- In one statement (each a statement's start-up otherwise): the fresh
    -- positions, their body ids drawn in position order (the lateral
    -- subquery, volatile, is run once a position, in generate_subscripts'
    -- order), and each position's tags as given and as a copy carries them.
    SELECT coalesce(array_agg(x ORDER BY x) FILTER (WHERE f.id IS NOT NULL), '{}'),
           coalesce(array_agg(f.id ORDER BY x), '{}'),
           coalesce(array_agg(f.src ORDER BY x), '{}'),
           coalesce(array_agg(f.src || jsonb_build_object('skipq.topic', t.name, 'skipq.body', f.id::text)
                              ORDER BY x), '{}')
    INTO v_fresh, v_body_id, v_src, v_copy
    FROM generate_subscripts(p_message_ids, 1) x
    CROSS JOIN LATERAL (SELECT CASE WHEN v_outcome[x] = 'sent' THEN nextval('skipq.topic_body_sequence') END AS id,
                               p_tags[x]::jsonb AS src) f;
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
        -- An unfiltered group's positions by assignment, not by a query.
        IF s.filter IS NULL THEN
            v_pos := v_fresh;
        ELSE
            v_pos := ARRAY(SELECT x FROM unnest(v_fresh) x WHERE skipq.topic_matches(s.filter, v_src[x]) ORDER BY x);
        END IF;
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

    IF v_keyed THEN
        FOR i IN 1 .. n LOOP
            IF v_dupof[i] IS NOT NULL THEN
                v_count[i] := v_count[v_dupof[i]]; v_at[i] := v_at[v_dupof[i]];
            END IF;
        END LOOP;
    END IF;

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
