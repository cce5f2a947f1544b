-- +goose Up
-- Topics (docs/DESIGN.md, "Topics"): one publish reaches every subscribed
-- queue (consumer group) in one transaction. Each group's copy is an
-- ordinary message of its queue, so every receive path delivers it
-- unchanged, but its body stays empty: the body is stored once, in
-- skipq.topic_bodies, and the copy names it under the reserved tag
-- skipq.body (beside skipq.topic, the topic's name). Readers put the body
-- back (skipq.topic_body in SQL; the node after its statements). No
-- column is added to skipq.messages and no claim function changes.
--
-- Only new tables, functions and one trigger: nothing that exists is
-- rewritten or locked for longer than the trigger's creation.

-- One row per (tenant, name); a namespace of its own beside the queues.
CREATE TABLE skipq.topics (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant               text        NOT NULL,
    name                 text        NOT NULL,
    fifo                 boolean     NOT NULL DEFAULT false,
    dedup_window_seconds integer     NOT NULL DEFAULT 300,
    retain_seconds       integer     NOT NULL DEFAULT 0,
    -- Counters folded in by the worker from skipq.topic_counts.
    published            bigint      NOT NULL DEFAULT 0,
    delivered            bigint      NOT NULL DEFAULT 0,
    unrouted             bigint      NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT topics_tenant_name_key UNIQUE (tenant, name)
);

-- A subscription binds a topic to a queue (its consumer group). No foreign
-- key to skipq.queues (adding one would take SHARE ROW EXCLUSIVE on it,
-- which every send reads): a publish joins the queues, so a subscription
-- whose queue was deleted reaches nothing, and the worker removes it
-- (skipq.topic_upkeep). A deleted topic takes its subscriptions along.
CREATE TABLE skipq.topic_subscriptions (
    topic_id   bigint      NOT NULL REFERENCES skipq.topics (id) ON DELETE CASCADE,
    queue_id   bigint      NOT NULL,
    filter     jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, queue_id)
);

-- The bodies of published messages, once each, whatever the number of
-- groups. A row lives while its dedup window lasts and while a copy still
-- names it; the worker removes it after both (skipq.topic_upkeep). No
-- foreign key to the topic: copies outlive a deleted topic.
CREATE SEQUENCE skipq.topic_body_sequence;
CREATE TABLE skipq.topic_bodies (
    id           bigint      PRIMARY KEY,
    topic_id     bigint      NOT NULL,
    message_id   text        NOT NULL,
    -- The publish's content hash (skipq.content_hash) when the client gave
    -- the messageId: a second publish of the key compares with it.
    content_hash bytea,
    body         bytea       NOT NULL,
    published_at timestamptz NOT NULL,
    window_ends  timestamptz NOT NULL,
    delivered_to integer     NOT NULL,
    -- The key of deduplication, and how the worker finds the copies: they
    -- carry the same messageId in every group.
    CONSTRAINT topic_bodies_message_key UNIQUE (topic_id, message_id)
);

-- What each publish counted, appended (never updated, so publishers of one
-- topic never wait for each other) and folded into skipq.topics by the
-- worker.
CREATE TABLE skipq.topic_counts (
    id        bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic_id  bigint  NOT NULL,
    published integer NOT NULL,
    delivered integer NOT NULL,
    unrouted  integer NOT NULL
);
CREATE INDEX topic_counts_topic_idx ON skipq.topic_counts (topic_id);

-- The lock that orders publishes against subscription changes of a topic:
-- publishers take it shared for their transaction, subscribe, unsubscribe
-- and delete exclusively, so a publish either committed before the change
-- (and the change waited for it) or reads the subscriptions after it.
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_lock_key(p_topic_id bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT hashtextextended('topic/' || p_topic_id::text, 0)
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.topic_lock_key(bigint) FROM PUBLIC;

-- Whether a message's tags match a subscription's filter: for every key the
-- filter names, the tag's value is one of the listed values. No filter, or
-- one without tags, matches everything.
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_matches(p_filter jsonb, p_tags jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT p_filter IS NULL OR NOT EXISTS (
        SELECT 1 FROM jsonb_each(coalesce(p_filter -> 'tags', '{}'::jsonb)) f
        WHERE NOT coalesce(f.value ? (p_tags ->> f.key), false))
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.topic_matches(jsonb, jsonb) FROM PUBLIC;

-- The body a message row stands for: its own, or for a topic's copy the
-- published body it names.
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_body(p_body bytea, p_tags jsonb) RETURNS bytea
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p_tags ? 'skipq.body'
                THEN coalesce((SELECT b.body FROM skipq.topic_bodies b
                               WHERE b.id = (p_tags ->> 'skipq.body')::bigint), p_body)
                ELSE p_body END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.topic_body(bytea, jsonb) FROM PUBLIC;

-- A publish: the arguments of skipq.message_insert (a send's messages as
-- arrays, bodies cut from p_body_data), to a topic instead of a queue.
-- Returns nothing when the topic does not exist; otherwise one row per
-- position: 'sent' with the number of groups reached and the queues where
-- the copy is available now (to wake), 'duplicate' with the first
-- publish's result, or the fault ('conflict', 'group_required',
-- 'group_refused'), in which case nothing was stored. Raises 40001 when a
-- subscribed queue was deleted and re-created meanwhile (run it again).
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_publish(
    p_tenant text, p_topic text, p_now timestamptz, p_server_max_receive_count integer,
    p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[],
    p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[],
    p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[],
    p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea,
    p_group_ids text[] DEFAULT NULL, p_key_ids bigint[] DEFAULT NULL)
RETURNS TABLE(pos integer, message_id text, outcome text, delivered_to integer,
              published_at timestamptz, woken bigint[])
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
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
    v_body_id := array_fill(NULL::bigint, ARRAY[n]);
    FOR i IN SELECT unnest(v_fresh) LOOP
        v_body_id[i] := nextval('skipq.topic_body_sequence');
    END LOOP;
    -- Each group in queue-id order (so concurrent publishes take the FIFO
    -- groups' locks in one order), its matching messages in one send of
    -- empty bodies that name the stored one. This statement's snapshot
    -- comes after the shared lock: no subscription change is in flight.
    FOR s IN
        SELECT ts.queue_id, ts.filter, q.name, q.content_based_dedup
        FROM skipq.topic_subscriptions ts JOIN skipq.queues q ON q.id = ts.queue_id
        WHERE ts.topic_id = t.id ORDER BY ts.queue_id
    LOOP
        v_pos := ARRAY(SELECT x FROM unnest(v_fresh) x
                       WHERE skipq.topic_matches(s.filter, p_tags[x]::jsonb) ORDER BY x);
        CONTINUE WHEN cardinality(v_pos) = 0;
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
                ARRAY(SELECT (p_tags[x]::jsonb || jsonb_build_object('skipq.topic', t.name,
                                                                     'skipq.body', v_body_id[x]::text))::text
                      FROM unnest(v_pos) x),
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

    FOR i IN 1 .. n LOOP
        IF v_dupof[i] IS NOT NULL THEN
            v_count[i] := v_count[v_dupof[i]]; v_at[i] := v_at[v_dupof[i]];
        END IF;
    END LOOP;

    -- The bodies, once each: of the messages some group got, and of keyed
    -- ones (their key answers a second publish even when nothing matched).
    INSERT INTO skipq.topic_bodies (id, topic_id, message_id, content_hash, body, published_at, window_ends,
                                    delivered_to)
    SELECT v_body_id[x], t.id, p_message_ids[x], CASE WHEN p_keyed[x] THEN v_hash[x] END,
           substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]), v_now,
           v_now + make_interval(secs => t.dedup_window_seconds), v_count[x]
    FROM unnest(v_fresh) x
    WHERE v_count[x] > 0 OR p_keyed[x];
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
REVOKE ALL ON FUNCTION skipq.topic_publish(text, text, timestamptz, integer, text[], boolean[], text[], text[], boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea, text[], bigint[]) FROM PUBLIC;

-- Subscribes a queue to a topic (creating the queue with the defaults, of
-- the topic's kind, when missing) or changes its filter. Returns
-- 'created', 'updated', or the refusal: 'topic_missing', 'kind_mismatch'
-- (a FIFO topic's groups are FIFO queues, a standard topic's standard
-- ones), 'too_many' (a topic has at most p_max subscriptions).
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_subscribe(p_tenant text, p_topic text, p_queue text, p_filter jsonb, p_max integer)
RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t skipq.topics;
    q skipq.queues;
    v_new boolean;
BEGIN
    SELECT * INTO t FROM skipq.topics WHERE tenant = p_tenant AND name = p_topic;
    IF NOT FOUND THEN
        RETURN 'topic_missing';
    END IF;
    PERFORM pg_advisory_xact_lock(skipq.topic_lock_key(t.id));
    INSERT INTO skipq.queues (tenant, name, fifo) VALUES (p_tenant, p_queue, t.fifo) ON CONFLICT DO NOTHING;
    SELECT * INTO q FROM skipq.queues WHERE tenant = p_tenant AND name = p_queue;
    IF q.fifo <> t.fifo THEN
        RETURN 'kind_mismatch';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM skipq.topic_subscriptions s WHERE s.topic_id = t.id AND s.queue_id = q.id)
       AND (SELECT count(*) FROM skipq.topic_subscriptions s JOIN skipq.queues x ON x.id = s.queue_id
            WHERE s.topic_id = t.id) >= p_max THEN
        RETURN 'too_many';
    END IF;
    INSERT INTO skipq.topic_subscriptions AS s (topic_id, queue_id, filter) VALUES (t.id, q.id, p_filter)
    ON CONFLICT (topic_id, queue_id) DO UPDATE SET filter = excluded.filter
    RETURNING (s.xmax = 0) INTO v_new;
    RETURN CASE WHEN v_new THEN 'created' ELSE 'updated' END;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.topic_subscribe(text, text, text, jsonb, integer) FROM PUBLIC;

-- Ends a subscription (the queue and its messages stay), or deletes a
-- topic with its subscriptions (p_queue NULL). Returns whether there was
-- one.
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_unsubscribe(p_tenant text, p_topic text, p_queue text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t skipq.topics;
BEGIN
    SELECT * INTO t FROM skipq.topics WHERE tenant = p_tenant AND name = p_topic;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(skipq.topic_lock_key(t.id));
    IF p_queue IS NULL THEN
        DELETE FROM skipq.topics WHERE id = t.id;
        RETURN true;
    END IF;
    DELETE FROM skipq.topic_subscriptions s
    USING skipq.queues q
    WHERE s.topic_id = t.id AND q.id = s.queue_id AND q.tenant = p_tenant AND q.name = p_queue;
    RETURN FOUND;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.topic_unsubscribe(text, text, text) FROM PUBLIC;

-- The worker's upkeep: folds the publishes' counts into their topics,
-- removes subscriptions whose queue was deleted, and removes bodies whose
-- dedup window ended and that no copy names any more, walking the bodies
-- from p_after (a window of p_max; the caller goes on from the returned
-- id, 0 when the walk reached the end). Copies carry the publish's
-- messageId in every group, so one probe of the message id index finds
-- them; a copy that moved (dead letter, requeue, redrive) carries its body
-- (skipq.topic_copy_moved).
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_upkeep(p_after bigint, p_max integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
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

    SELECT max(w.id) INTO v_last FROM (
        SELECT b.id FROM skipq.topic_bodies b WHERE b.id > p_after ORDER BY b.id LIMIT p_max) w;
    DELETE FROM skipq.topic_bodies b
    WHERE b.id > p_after AND b.id <= v_last
      AND b.window_ends <= now()
      AND NOT EXISTS (SELECT 1 FROM skipq.messages m
                      WHERE m.message_id = b.message_id AND m.tags ->> 'skipq.body' = b.id::text);
    IF v_last IS NULL OR NOT EXISTS (SELECT 1 FROM skipq.topic_bodies b WHERE b.id > v_last) THEN
        RETURN 0;
    END IF;
    RETURN v_last;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.topic_upkeep(bigint, integer) FROM PUBLIC;

-- The checks of a send's (or publish's) messages, one message's fields
-- shared by the batch: skipq.enqueue's, and skipq.publish_bodies's (p_queue
-- NULL: a topic has no dead-letter queue of its own to compare).
-- +goose StatementBegin
CREATE FUNCTION skipq.send_check(p_queue text, p_bodies bytea[], p_metadata text, p_tags jsonb,
    p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer,
    p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_group_ids text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_max_bytes integer := skipq.limit_setting('max_message_bytes', 1048576);
    i           integer;
    t           record;
BEGIN
    PERFORM skipq.check(coalesce(cardinality(p_bodies), 0) BETWEEN 1 AND 1000, 'a batch holds 1 to 1000 messages');
    PERFORM skipq.check(jsonb_typeof(p_tags) = 'object', 'tags must be a JSON object of strings');
    PERFORM skipq.check((SELECT count(*) FROM jsonb_object_keys(p_tags)) <= 32, 'tags: at most 32');
    FOR t IN SELECT key, value FROM jsonb_each(p_tags) LOOP
        PERFORM skipq.check(t.key ~ '^[A-Za-z0-9_.-]{1,64}$', 'tag key ' || quote_literal(t.key) || ' must match ^[A-Za-z0-9_.-]{1,64}$');
        PERFORM skipq.check(left(t.key, 6) <> 'skipq.', 'tag keys must not start with "skipq."');
        PERFORM skipq.check(jsonb_typeof(t.value) = 'string', 'tag ' || quote_literal(t.key) || ' must be a string');
        PERFORM skipq.check(octet_length(t.value #>> '{}') <= 1024, 'tag ' || quote_literal(t.key) || ': values are at most 1024 bytes');
    END LOOP;
    PERFORM skipq.check(p_delay_seconds IS NULL OR p_delay_seconds BETWEEN 0 AND skipq.limit_setting('max_delay_seconds', 43200),
                        'delay_seconds is out of range');
    PERFORM skipq.check(p_expiration_seconds IS NULL OR p_expiration_seconds BETWEEN 0 AND skipq.limit_setting('max_expiration_seconds', 43200),
                        'expiration_seconds is out of range');
    PERFORM skipq.check(p_max_receive_count IS NULL OR p_max_receive_count BETWEEN 0 AND skipq.limit_setting('max_receive_count', 1024),
                        'max_receive_count is out of range');
    IF p_dead_letter_queue IS NOT NULL AND p_dead_letter_queue <> '' THEN
        PERFORM skipq.check_queue_name('dead_letter_queue', p_dead_letter_queue);
        -- Its messages would come back with a fresh receive count forever.
        PERFORM skipq.check(p_queue IS NULL OR p_dead_letter_queue <> p_queue, 'dead_letter_queue must not be the queue itself');
    END IF;
    PERFORM skipq.check(octet_length(p_client_id) <= 256, 'client_id must be at most 256 bytes');
    PERFORM skipq.check(p_message_ids IS NULL OR cardinality(p_message_ids) = cardinality(p_bodies),
                        'message_ids must have one id per body');
    PERFORM skipq.check(p_group_ids IS NULL OR cardinality(p_group_ids) = cardinality(p_bodies),
                        'group_ids must have one group per body');
    PERFORM skipq.check(p_group_ids IS NULL OR (SELECT count(DISTINCT g) FROM unnest(p_group_ids) g) <= 64,
                        'a batch names at most 64 distinct group ids');
    FOR i IN 1 .. cardinality(p_bodies) LOOP
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) > 0 OR p_metadata <> '', 'body or metadata must be non-empty');
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) + octet_length(p_metadata) <= v_max_bytes,
                            'body and metadata together exceed ' || v_max_bytes || ' bytes');
        PERFORM skipq.check(p_message_ids IS NULL OR p_message_ids[i] IS NULL OR p_message_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'message_id must match ^[A-Za-z0-9._:-]{1,128}$');
        PERFORM skipq.check(p_group_ids IS NULL OR p_group_ids[i] IS NULL OR p_group_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'group_id must match ^[A-Za-z0-9._:-]{1,128}$');
    END LOOP;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.send_check(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text[]) FROM PUBLIC;

-- skipq.enqueue, its checks moved into skipq.send_check.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.enqueue(p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[]) RETURNS TABLE(message_id text, sequence bigint, duplicate boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    n            integer := coalesce(cardinality(p_bodies), 0);
    v_data       bytea;
    v_offsets    integer[];
    v_lengths    integer[];
    v_queue_id   bigint;
    v_fresh      integer := 0;
    r            record;
BEGIN
    PERFORM skipq.check(p_tenant IS NOT NULL AND p_tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue', p_queue);
    PERFORM skipq.send_check(p_queue, p_bodies, v_metadata, v_tags, p_delay_seconds, p_expiration_seconds,
                             p_max_receive_count, p_dead_letter_queue, p_message_ids, v_client, p_group_ids);

    -- A queue created by a send with groups is FIFO (docs/FIFO.md).
    INSERT INTO skipq.queues (tenant, name, fifo)
    SELECT p_tenant, p_queue, p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL)
    WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = p_tenant AND e.name = p_queue)
    ON CONFLICT DO NOTHING;

    SELECT coalesce(string_agg(coalesce(u.b, '\x'::bytea), '\x'::bytea ORDER BY u.x), '\x'::bytea),
           array_agg(u.start::integer ORDER BY u.x), array_agg(u.len ORDER BY u.x)
    INTO v_data, v_offsets, v_lengths
    FROM (SELECT b, x, coalesce(length(b), 0) AS len,
                 1 + sum(coalesce(length(b), 0)) OVER (ORDER BY x) - coalesce(length(b), 0) AS start
          FROM unnest(p_bodies) WITH ORDINALITY AS u(b, x)) u;

    FOR r IN
        SELECT * FROM skipq.message_insert(
            p_tenant, p_queue, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT coalesce(p_message_ids[x], skipq.uuid_v7()::text)
                  FROM generate_series(1, n) x ORDER BY x),
            ARRAY(SELECT p_message_ids[x] IS NOT NULL FROM generate_series(1, n) x ORDER BY x),
            array_fill(v_client, ARRAY[n]), array_fill(v_metadata, ARRAY[n]),
            array_fill(p_body_binary, ARRAY[n]), array_fill(v_tags::text, ARRAY[n]),
            array_fill(coalesce(p_delay_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_expiration_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_max_receive_count, 0), ARRAY[n]),
            array_fill(coalesce(p_dead_letter_queue, ''), ARRAY[n]),
            array_fill(p_dead_letter_queue IS NOT NULL, ARRAY[n]),
            v_offsets, v_lengths, v_data,
            CASE WHEN p_group_ids IS NULL THEN NULL
                 ELSE ARRAY(SELECT p_group_ids[x] FROM generate_series(1, n) x ORDER BY x) END) s
        ORDER BY s.pos
    LOOP
        PERFORM skipq.check(r.outcome <> 'group_required',
            'queue ' || quote_literal(p_queue) || ' is FIFO: every message needs a group_id');
        PERFORM skipq.check(r.outcome <> 'group_refused',
            'queue ' || quote_literal(p_queue) || ' is not FIFO: group_id is not allowed');
        PERFORM skipq.check(r.outcome <> 'conflict',
            'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already sent with different content');
        message_id := r.message_id; sequence := r.sequence; duplicate := r.outcome = 'duplicate';
        v_queue_id := r.queue_id;
        IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
            v_fresh := v_fresh + 1;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- One notification per call, delivered at commit ("sql" is never a
    -- node id, so every node wakes its waiters).
    IF v_fresh > 0 THEN
        PERFORM skipq.wake('sql', ARRAY[v_queue_id], ARRAY[v_fresh]);
    END IF;
END $_$;
-- +goose StatementEnd

-- The SQL API's publish: skipq.send's arguments, to a topic. Runs in the
-- caller's transaction; every group it reached wakes at commit. Returns
-- the number of groups reached (a duplicate: the first publish's).
-- +goose StatementBegin
CREATE FUNCTION skipq.publish_bodies(p_topic text, p_bodies bytea[], p_body_binary boolean, p_metadata text,
    p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer,
    p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[])
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tags    jsonb := coalesce(p_tags, '{}'::jsonb);
    v_meta    text := coalesce(p_metadata, '');
    v_client  text := coalesce(p_client_id, '');
    n         integer := coalesce(cardinality(p_bodies), 0);
    v_data    bytea;
    v_offsets integer[];
    v_lengths integer[];
    v_reached integer := 0;
    v_woken   bigint[] := '{}';
    r         record;
BEGIN
    PERFORM skipq.check(p_tenant IS NOT NULL AND p_tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('topic', p_topic);
    PERFORM skipq.send_check(NULL, p_bodies, v_meta, v_tags, p_delay_seconds, p_expiration_seconds,
                             p_max_receive_count, p_dead_letter_queue, p_message_ids, v_client, p_group_ids);
    SELECT coalesce(string_agg(coalesce(u.b, '\x'::bytea), '\x'::bytea ORDER BY u.x), '\x'::bytea),
           array_agg(u.start::integer ORDER BY u.x), array_agg(u.len ORDER BY u.x)
    INTO v_data, v_offsets, v_lengths
    FROM (SELECT b, x, coalesce(length(b), 0) AS len,
                 1 + sum(coalesce(length(b), 0)) OVER (ORDER BY x) - coalesce(length(b), 0) AS start
          FROM unnest(p_bodies) WITH ORDINALITY AS u(b, x)) u;
    FOR r IN
        SELECT * FROM skipq.topic_publish(
            p_tenant, p_topic, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT coalesce(p_message_ids[x], skipq.uuid_v7()::text) FROM generate_series(1, n) x ORDER BY x),
            ARRAY(SELECT p_message_ids[x] IS NOT NULL FROM generate_series(1, n) x ORDER BY x),
            array_fill(v_client, ARRAY[n]), array_fill(v_meta, ARRAY[n]),
            array_fill(p_body_binary, ARRAY[n]), array_fill(v_tags::text, ARRAY[n]),
            array_fill(coalesce(p_delay_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_expiration_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_max_receive_count, 0), ARRAY[n]),
            array_fill(coalesce(p_dead_letter_queue, ''), ARRAY[n]),
            array_fill(p_dead_letter_queue IS NOT NULL, ARRAY[n]),
            v_offsets, v_lengths, v_data, p_group_ids, NULL)
    LOOP
        PERFORM skipq.check(r.outcome <> 'group_required',
            'topic ' || quote_literal(p_topic) || ' is FIFO: every message needs a group_id');
        PERFORM skipq.check(r.outcome <> 'group_refused',
            'topic ' || quote_literal(p_topic) || ' is not FIFO: group_id is not allowed');
        PERFORM skipq.check(r.outcome <> 'conflict',
            'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already published with different content');
        v_reached := v_reached + r.delivered_to;
        v_woken := v_woken || r.woken;
    END LOOP;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skipq: topic % does not exist', quote_literal(p_topic) USING ERRCODE = 'SQ404';
    END IF;
    IF cardinality(v_woken) > 0 THEN
        -- One notification per queue, delivered at commit ("sql" is never
        -- a node id, so every node wakes its waiters).
        PERFORM skipq.wake('sql', array_agg(w.q ORDER BY w.q), array_agg(w.c ORDER BY w.q))
        FROM (SELECT u AS q, count(*)::integer AS c FROM unnest(v_woken) u GROUP BY u) w;
    END IF;
    RETURN v_reached;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.publish_bodies(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text, text[]) FROM PUBLIC;

-- +goose StatementBegin
CREATE FUNCTION skipq.publish(topic text, body bytea, metadata text DEFAULT '', tags jsonb DEFAULT '{}',
    delay_seconds integer DEFAULT NULL, expiration_seconds integer DEFAULT NULL,
    max_receive_count integer DEFAULT NULL, dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL,
    client_id text DEFAULT '', tenant text DEFAULT 'default', group_id text DEFAULT NULL) RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT skipq.publish_bodies(topic, ARRAY[body], true, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant,
        CASE WHEN group_id IS NULL THEN NULL ELSE ARRAY[group_id] END)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.publish(topic text, body text, metadata text DEFAULT '', tags jsonb DEFAULT '{}',
    delay_seconds integer DEFAULT NULL, expiration_seconds integer DEFAULT NULL,
    max_receive_count integer DEFAULT NULL, dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL,
    client_id text DEFAULT '', tenant text DEFAULT 'default', group_id text DEFAULT NULL) RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT skipq.publish_bodies(topic, ARRAY[pg_catalog.convert_to(body, 'UTF8')], false, metadata, tags,
        delay_seconds, expiration_seconds, max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant,
        CASE WHEN group_id IS NULL THEN NULL ELSE ARRAY[group_id] END)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION skipq.publish(topic text, body jsonb, metadata text DEFAULT '', tags jsonb DEFAULT '{}',
    delay_seconds integer DEFAULT NULL, expiration_seconds integer DEFAULT NULL,
    max_receive_count integer DEFAULT NULL, dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL,
    client_id text DEFAULT '', tenant text DEFAULT 'default', group_id text DEFAULT NULL) RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT skipq.publish(topic, body::text, metadata, tags, delay_seconds, expiration_seconds,
                         max_receive_count, dead_letter_queue, message_id, client_id, tenant, group_id)
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.publish(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text, text),
    skipq.publish(text, text, text, jsonb, integer, integer, integer, text, text, text, text, text),
    skipq.publish(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION skipq.publish(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text, text),
    skipq.publish(text, text, text, jsonb, integer, integer, integer, text, text, text, text, text),
    skipq.publish(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text, text) TO skipq_producer;

-- skipq.receive hands SQL consumers a topic copy's body.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM skipq.check(receive.tenant IS NOT NULL AND receive.tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue_name', queue_name);
    PERFORM skipq.check(max_messages BETWEEN 1 AND 1024, 'max_messages must be between 1 and 1024');
    PERFORM skipq.check(visibility_seconds IS NULL OR visibility_seconds BETWEEN 1 AND 43200,
                        'visibility_seconds must be between 1 and 43200');
    PERFORM skipq.check(max_messages_per_group BETWEEN 1 AND 10, 'max_messages_per_group must be between 1 and 10');
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name AND q.fifo) THEN
        -- A FIFO queue: groups in rotation, each group's run in order, as
        -- the claim returns them.
        RETURN QUERY
        SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
               queue_name, m.message_id, m.sequence,
               m.group_id, m.client_id, m.metadata, skipq.topic_body(m.body, m.tags), m.body_binary, m.tags, m.sent_at,
               m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
               m.re_routed_from, m.dead_lettered_at
        FROM skipq.message_claim_grouped(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                                         max_messages_per_group, 9223372036854775807, 0, 'claim') m;
        RETURN;
    END IF;
    RETURN QUERY
    -- The handle as service/receipt.go encodes it (base64url, no padding;
    -- 48 bytes give 64 characters, under encode()'s 76 per line).
    SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
           queue_name, m.message_id, m.sequence,
           NULL::text, m.client_id, m.metadata, skipq.topic_body(m.body, m.tags), m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0) m
    ORDER BY m.sequence;
END $$;
-- +goose StatementEnd

-- A copy that moves to another queue (dead-letter move, requeue, redrive:
-- the inserts that set re_routed_from) takes its body along and stops
-- naming the stored one, so the worker finds every copy that names a body
-- by the publish's messageId (a redrive gives a new id). Last: CREATE
-- TRIGGER takes SHARE ROW EXCLUSIVE on skipq.messages until the commit
-- that follows.
-- +goose StatementBegin
CREATE FUNCTION skipq.topic_copy_moved() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.body := skipq.topic_body(NEW.body, NEW.tags);
    NEW.tags := NEW.tags - 'skipq.body';
    RETURN NEW;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.topic_copy_moved() FROM PUBLIC;
SET LOCAL lock_timeout = '2s';
CREATE TRIGGER messages_topic_copy_moved BEFORE INSERT ON skipq.messages
    FOR EACH ROW WHEN (NEW.re_routed_from IS NOT NULL AND NEW.tags ? 'skipq.body')
    EXECUTE FUNCTION skipq.topic_copy_moved();

-- +goose Down
SET LOCAL lock_timeout = '2s';
DROP TRIGGER messages_topic_copy_moved ON skipq.messages;
DROP FUNCTION skipq.topic_copy_moved();
DROP FUNCTION skipq.publish(text, bytea, text, jsonb, integer, integer, integer, text, text, text, text, text);
DROP FUNCTION skipq.publish(text, text, text, jsonb, integer, integer, integer, text, text, text, text, text);
DROP FUNCTION skipq.publish(text, jsonb, text, jsonb, integer, integer, integer, text, text, text, text, text);
DROP FUNCTION skipq.publish_bodies(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text, text[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.enqueue(p_queue text, p_bodies bytea[], p_body_binary boolean, p_metadata text, p_tags jsonb, p_delay_seconds integer, p_expiration_seconds integer, p_max_receive_count integer, p_dead_letter_queue text, p_message_ids text[], p_client_id text, p_tenant text, p_group_ids text[]) RETURNS TABLE(message_id text, sequence bigint, duplicate boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_tags       jsonb := coalesce(p_tags, '{}'::jsonb);
    v_metadata   text := coalesce(p_metadata, '');
    v_client     text := coalesce(p_client_id, '');
    v_max_bytes  integer := skipq.limit_setting('max_message_bytes', 1048576);
    n            integer := coalesce(cardinality(p_bodies), 0);
    v_data       bytea;
    v_offsets    integer[];
    v_lengths    integer[];
    v_queue_id   bigint;
    v_fresh      integer := 0;
    i            integer;
    t            record;
    r            record;
BEGIN
    PERFORM skipq.check(p_tenant IS NOT NULL AND p_tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue', p_queue);
    PERFORM skipq.check(coalesce(cardinality(p_bodies), 0) BETWEEN 1 AND 1000, 'a batch holds 1 to 1000 messages');
    PERFORM skipq.check(jsonb_typeof(v_tags) = 'object', 'tags must be a JSON object of strings');
    PERFORM skipq.check((SELECT count(*) FROM jsonb_object_keys(v_tags)) <= 32, 'tags: at most 32');
    FOR t IN SELECT key, value FROM jsonb_each(v_tags) LOOP
        PERFORM skipq.check(t.key ~ '^[A-Za-z0-9_.-]{1,64}$', 'tag key ' || quote_literal(t.key) || ' must match ^[A-Za-z0-9_.-]{1,64}$');
        PERFORM skipq.check(left(t.key, 6) <> 'skipq.', 'tag keys must not start with "skipq."');
        PERFORM skipq.check(jsonb_typeof(t.value) = 'string', 'tag ' || quote_literal(t.key) || ' must be a string');
        PERFORM skipq.check(octet_length(t.value #>> '{}') <= 1024, 'tag ' || quote_literal(t.key) || ': values are at most 1024 bytes');
    END LOOP;
    PERFORM skipq.check(p_delay_seconds IS NULL OR p_delay_seconds BETWEEN 0 AND skipq.limit_setting('max_delay_seconds', 43200),
                        'delay_seconds is out of range');
    PERFORM skipq.check(p_expiration_seconds IS NULL OR p_expiration_seconds BETWEEN 0 AND skipq.limit_setting('max_expiration_seconds', 43200),
                        'expiration_seconds is out of range');
    PERFORM skipq.check(p_max_receive_count IS NULL OR p_max_receive_count BETWEEN 0 AND skipq.limit_setting('max_receive_count', 1024),
                        'max_receive_count is out of range');
    IF p_dead_letter_queue IS NOT NULL AND p_dead_letter_queue <> '' THEN
        PERFORM skipq.check_queue_name('dead_letter_queue', p_dead_letter_queue);
        -- Its messages would come back with a fresh receive count forever.
        PERFORM skipq.check(p_dead_letter_queue <> p_queue, 'dead_letter_queue must not be the queue itself');
    END IF;
    PERFORM skipq.check(octet_length(v_client) <= 256, 'client_id must be at most 256 bytes');
    PERFORM skipq.check(p_message_ids IS NULL OR cardinality(p_message_ids) = cardinality(p_bodies),
                        'message_ids must have one id per body');
    PERFORM skipq.check(p_group_ids IS NULL OR cardinality(p_group_ids) = cardinality(p_bodies),
                        'group_ids must have one group per body');
    PERFORM skipq.check(p_group_ids IS NULL OR (SELECT count(DISTINCT g) FROM unnest(p_group_ids) g) <= 64,
                        'a batch names at most 64 distinct group ids');
    FOR i IN 1 .. cardinality(p_bodies) LOOP
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) > 0 OR v_metadata <> '', 'body or metadata must be non-empty');
        PERFORM skipq.check(coalesce(length(p_bodies[i]), 0) + octet_length(v_metadata) <= v_max_bytes,
                            'body and metadata together exceed ' || v_max_bytes || ' bytes');
        PERFORM skipq.check(p_message_ids IS NULL OR p_message_ids[i] IS NULL OR p_message_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'message_id must match ^[A-Za-z0-9._:-]{1,128}$');
        PERFORM skipq.check(p_group_ids IS NULL OR p_group_ids[i] IS NULL OR p_group_ids[i] ~ '^[A-Za-z0-9._:-]{1,128}$',
                            'group_id must match ^[A-Za-z0-9._:-]{1,128}$');
    END LOOP;

    -- A queue created by a send with groups is FIFO (SPEC §12).
    INSERT INTO skipq.queues (tenant, name, fifo)
    SELECT p_tenant, p_queue, p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL)
    WHERE NOT EXISTS (SELECT 1 FROM skipq.queues e WHERE e.tenant = p_tenant AND e.name = p_queue)
    ON CONFLICT DO NOTHING;

    SELECT coalesce(string_agg(coalesce(u.b, '\x'::bytea), '\x'::bytea ORDER BY u.x), '\x'::bytea),
           array_agg(u.start::integer ORDER BY u.x), array_agg(u.len ORDER BY u.x)
    INTO v_data, v_offsets, v_lengths
    FROM (SELECT b, x, coalesce(length(b), 0) AS len,
                 1 + sum(coalesce(length(b), 0)) OVER (ORDER BY x) - coalesce(length(b), 0) AS start
          FROM unnest(p_bodies) WITH ORDINALITY AS u(b, x)) u;

    FOR r IN
        SELECT * FROM skipq.message_insert(
            p_tenant, p_queue, NULL, skipq.limit_setting('max_receive_count', 1024),
            ARRAY(SELECT coalesce(p_message_ids[x], skipq.uuid_v7()::text)
                  FROM generate_series(1, n) x ORDER BY x),
            ARRAY(SELECT p_message_ids[x] IS NOT NULL FROM generate_series(1, n) x ORDER BY x),
            array_fill(v_client, ARRAY[n]), array_fill(v_metadata, ARRAY[n]),
            array_fill(p_body_binary, ARRAY[n]), array_fill(v_tags::text, ARRAY[n]),
            array_fill(coalesce(p_delay_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_expiration_seconds, -1), ARRAY[n]),
            array_fill(coalesce(p_max_receive_count, 0), ARRAY[n]),
            array_fill(coalesce(p_dead_letter_queue, ''), ARRAY[n]),
            array_fill(p_dead_letter_queue IS NOT NULL, ARRAY[n]),
            v_offsets, v_lengths, v_data,
            CASE WHEN p_group_ids IS NULL THEN NULL
                 ELSE ARRAY(SELECT p_group_ids[x] FROM generate_series(1, n) x ORDER BY x) END) s
        ORDER BY s.pos
    LOOP
        PERFORM skipq.check(r.outcome <> 'group_required',
            'queue ' || quote_literal(p_queue) || ' is FIFO: every message needs a group_id');
        PERFORM skipq.check(r.outcome <> 'group_refused',
            'queue ' || quote_literal(p_queue) || ' is not FIFO: group_id is not allowed');
        PERFORM skipq.check(r.outcome <> 'conflict',
            'idempotency conflict: message_id ' || quote_literal(r.message_id) || ' was already sent with different content');
        message_id := r.message_id; sequence := r.sequence; duplicate := r.outcome = 'duplicate';
        v_queue_id := r.queue_id;
        IF r.outcome = 'sent' AND r.delayed_to IS NULL THEN
            v_fresh := v_fresh + 1;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- One notification per call, delivered at commit ("sql" is never a
    -- node id, so every node wakes its waiters).
    IF v_fresh > 0 THEN
        PERFORM skipq.wake('sql', ARRAY[v_queue_id], ARRAY[v_fresh]);
    END IF;
END $_$;
-- +goose StatementEnd
DROP FUNCTION skipq.send_check(text, bytea[], text, jsonb, integer, integer, integer, text, text[], text, text[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM skipq.check(receive.tenant IS NOT NULL AND receive.tenant <> '', 'tenant must not be empty');
    PERFORM skipq.check_queue_name('queue_name', queue_name);
    PERFORM skipq.check(max_messages BETWEEN 1 AND 1024, 'max_messages must be between 1 and 1024');
    PERFORM skipq.check(visibility_seconds IS NULL OR visibility_seconds BETWEEN 1 AND 43200,
                        'visibility_seconds must be between 1 and 43200');
    PERFORM skipq.check(max_messages_per_group BETWEEN 1 AND 10, 'max_messages_per_group must be between 1 and 10');
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name AND q.fifo) THEN
        -- A FIFO queue: groups in rotation, each group's run in order, as
        -- the claim returns them.
        RETURN QUERY
        SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
               queue_name, m.message_id, m.sequence,
               m.group_id, m.client_id, m.metadata, m.body, m.body_binary, m.tags, m.sent_at,
               m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
               m.re_routed_from, m.dead_lettered_at
        FROM skipq.message_claim_grouped(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                                         max_messages_per_group, 9223372036854775807, 0, 'claim') m;
        RETURN;
    END IF;
    RETURN QUERY
    -- The handle as service/receipt.go encodes it (base64url, no padding;
    -- 48 bytes give 64 characters, under encode()'s 76 per line).
    SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
           queue_name, m.message_id, m.sequence,
           NULL::text, m.client_id, m.metadata, m.body, m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0) m
    ORDER BY m.sequence;
END $$;
-- +goose StatementEnd
DROP FUNCTION skipq.topic_upkeep(bigint, integer);
DROP FUNCTION skipq.topic_unsubscribe(text, text, text);
DROP FUNCTION skipq.topic_subscribe(text, text, text, jsonb, integer);
DROP FUNCTION skipq.topic_publish(text, text, timestamptz, integer, text[], boolean[], text[], text[], boolean[], text[], integer[], integer[], integer[], text[], boolean[], integer[], integer[], bytea, text[], bigint[]);
DROP FUNCTION skipq.topic_body(bytea, jsonb);
DROP FUNCTION skipq.topic_matches(jsonb, jsonb);
DROP FUNCTION skipq.topic_lock_key(bigint);
DROP TABLE skipq.topic_counts;
DROP TABLE skipq.topic_bodies;
DROP SEQUENCE skipq.topic_body_sequence;
DROP TABLE skipq.topic_subscriptions;
DROP TABLE skipq.topics;
