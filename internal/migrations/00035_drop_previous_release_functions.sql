-- +goose Up
-- The functions the previous release still called, dropped now that no
-- node of this release or the previous one calls them: the six *_untraced
-- bodies that 00034 folded into their traced functions, and the
-- single-argument skipq.group_prune that 00031 replaced by the windowed one.
-- (00034 kept them one release because a previous-release node's call of its
-- old wrapper could be in flight when a DROP committed.)
DROP FUNCTION skipq.message_insert_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[], p_dedup_ids text[]);
DROP FUNCTION skipq.message_claim_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint);
DROP FUNCTION skipq.message_claim_grouped_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text);
DROP FUNCTION skipq.message_claim_and_delete_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint);
DROP FUNCTION skipq.message_ack_untraced(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[]);
DROP FUNCTION skipq.message_set_visibility_untraced(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_visibility_seconds integer[]);
DROP FUNCTION skipq.group_prune(p_max integer);

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_insert_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[] DEFAULT NULL::text[], p_dedup_ids text[] DEFAULT NULL::text[]) RETURNS TABLE(pos integer, queue_id bigint, message_id text, sequence bigint, sent_at timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, outcome text)
    LANGUAGE plpgsql
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
    q         skipq.queues;
    v_now     timestamptz := coalesce(p_now, now());
    n         integer := coalesce(cardinality(p_message_ids), 0);
    -- Per position, for keyed messages only: the content hash, and what a
    -- live key or an earlier position decided.
    v_hash    bytea[];
    v_outcome text[] := array_fill('sent'::text, ARRAY[n]);
    v_seq     bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    v_sent    timestamptz[] := array_fill(NULL::timestamptz, ARRAY[n]);
    v_delayed timestamptz[] := array_fill(NULL::timestamptz, ARRAY[n]);
    v_expires timestamptz[] := array_fill(NULL::timestamptz, ARRAY[n]);
    v_first   integer;
    -- The idempotency key of each position: the client's messageId, or on
    -- a queue with content-based deduplication, for a message without
    -- one, 'content:' and its body's SHA-256 (v_content).
    v_keys    text[] := p_message_ids;
    v_keyed   boolean[] := p_keyed;
    v_content boolean[] := array_fill(false, ARRAY[n]);
    -- Positions keyed by an SQS MessageDeduplicationId (p_dedup_ids).
    v_dedup   boolean[] := array_fill(false, ARRAY[n]);
    -- The id a duplicate answers with: its first send's message's.
    v_dupid   text[] := p_message_ids;
    v_sent_pos integer[];
    k         skipq.dedup_keys;
    i         integer;
BEGIN
    SELECT * INTO q FROM skipq.queues WHERE tenant = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Every message of a FIFO queue names a group, no message of a standard
    -- queue does; otherwise nothing is stored, and the positions at fault
    -- come back ('group_required', 'group_refused').
    IF (CASE WHEN q.fifo THEN p_group_ids IS NULL OR array_position(p_group_ids, NULL) IS NOT NULL
             ELSE p_group_ids IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_group_ids) g WHERE g IS NOT NULL) END) THEN
        RETURN QUERY
            SELECT x, q.id, p_message_ids[x], NULL::bigint, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
                   CASE WHEN q.fifo THEN 'group_required' ELSE 'group_refused' END
            FROM generate_subscripts(p_message_ids, 1) x
            WHERE (p_group_ids[x] IS NULL) = q.fifo ORDER BY x;
        RETURN;
    END IF;

    IF q.content_based_dedup AND NOT (true = ALL(p_keyed)) THEN
        v_content := ARRAY(SELECT NOT p_keyed[x] FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keys := ARRAY(
            SELECT CASE WHEN p_keyed[x] THEN p_message_ids[x]
                        ELSE 'content:' || encode(sha256(substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x])), 'hex') END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keyed := array_fill(true, ARRAY[n]);
    END IF;

    -- An SQS MessageDeduplicationId (SPEC §11.16 D6) keys its message in a
    -- space of its own, 'dedup/' and the id ('/' is in no native messageId),
    -- and overrides content-based deduplication. Its hash is the key's own,
    -- so a resend with any other content is a duplicate, never a conflict;
    -- a duplicate answers with the first send's (server) messageId.
    IF cardinality(array_remove(p_dedup_ids, NULL)) > 0 THEN
        v_dedup := ARRAY(SELECT p_dedup_ids[x] IS NOT NULL FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keys := ARRAY(SELECT CASE WHEN v_dedup[x] THEN 'dedup/' || p_dedup_ids[x] ELSE v_keys[x] END
                        FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        v_keyed := ARRAY(SELECT v_keyed[x] OR v_dedup[x] FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
    END IF;

    IF true = ANY(v_keyed) THEN
        -- Senders of the same key are serialized until commit, in the
        -- order of the locks' numbers so that two batches cannot deadlock;
        -- each statement below takes a new snapshot (READ COMMITTED) and
        -- so sees a key that the sender before committed.
        PERFORM pg_advisory_xact_lock(l.h) FROM (
            SELECT DISTINCT hashtextextended(q.id::text || '/' || v_keys[x], 0) AS h
            FROM generate_subscripts(p_message_ids, 1) x WHERE v_keyed[x] ORDER BY 1) l;
        -- A content key's hash is the body's alone (SQS's rule): a resend
        -- with other metadata, tags or clientId is still a duplicate.
        v_hash := ARRAY(
            SELECT CASE WHEN v_dedup[x] THEN sha256(convert_to(v_keys[x], 'UTF8'))
                        WHEN v_content[x] THEN sha256(substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]))
                        WHEN p_keyed[x] THEN skipq.content_hash(
                       substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
                       p_body_binaries[x], p_metadatas[x], p_client_ids[x], p_tags[x]::jsonb) END
            FROM generate_subscripts(p_message_ids, 1) x ORDER BY x);
        -- A live key (inside its window, or its message still in the
        -- queue) answers for the first position that carries it.
        FOR k IN
            SELECT d.* FROM skipq.dedup_keys d
            WHERE d.queue_id = q.id
              AND d.message_id = ANY(ARRAY(SELECT v_keys[x] FROM generate_subscripts(p_message_ids, 1) x
                                           WHERE v_keyed[x]))
              AND (d.window_ends > v_now OR EXISTS (
                  SELECT 1 FROM skipq.messages m
                  WHERE m.queue_id = d.queue_id AND m.message_id = coalesce(d.result_message_id, d.message_id)))
        LOOP
            i := array_position(v_keys, k.message_id);
            v_dupid[i] := coalesce(k.result_message_id, k.message_id);
            v_outcome[i] := CASE WHEN v_hash[i] = k.content_hash THEN 'duplicate' ELSE 'conflict' END;
            v_seq[i] := k.sequence; v_sent[i] := k.sent_at;
            v_delayed[i] := k.delayed_to; v_expires[i] := k.expires_at;
        END LOOP;
        -- A key repeated within the call: each later position is a
        -- duplicate (or a conflict) of the first, and answers as it does.
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN NOT v_keyed[i];
            v_first := array_position(v_keys, v_keys[i]);
            CONTINUE WHEN v_first = i;
            v_dupid[i] := v_dupid[v_first];
            v_outcome[i] := CASE WHEN v_hash[i] = v_hash[v_first] THEN 'duplicate' ELSE 'conflict' END;
            v_seq[i] := v_seq[v_first]; v_sent[i] := v_sent[v_first];
            v_delayed[i] := v_delayed[v_first]; v_expires[i] := v_expires[v_first];
        END LOOP;
        IF 'conflict' = ANY(v_outcome) THEN
            RETURN QUERY
                SELECT x, q.id, p_message_ids[x], NULL::bigint, NULL::timestamptz, NULL::timestamptz,
                       NULL::timestamptz, 'conflict'::text
                FROM generate_subscripts(p_message_ids, 1) x WHERE v_outcome[x] = 'conflict' ORDER BY x;
            RETURN;
        END IF;
    END IF;

    v_sent_pos := ARRAY(SELECT x FROM generate_subscripts(p_message_ids, 1) x
                        WHERE v_outcome[x] = 'sent' ORDER BY x);
    IF q.fifo THEN
        -- Waits for earlier senders of the groups to commit, so the
        -- sequences drawn below follow theirs (skipq.group_enter).
        PERFORM skipq.group_enter(array_fill(q.id, ARRAY[cardinality(v_sent_pos)]),
                                  ARRAY(SELECT p_group_ids[x] FROM unnest(v_sent_pos) x));
    END IF;
    RETURN QUERY
    WITH inserted AS (
        -- Sequences are drawn in position order (ORDER BY x): a batch's
        -- messages are delivered in the order they were given, and the
        -- k-th sequence is the k-th position sent.
        INSERT INTO skipq.messages AS msg (
            queue_id, message_id, client_id, metadata, body, body_binary, tags,
            sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, ready, group_id)
        SELECT q.id, p_message_ids[x], p_client_ids[x], p_metadatas[x],
               substring(p_body_data FROM p_body_offsets[x] FOR p_body_lengths[x]),
               p_body_binaries[x], p_tags[x]::jsonb,
               v_now,
               v_now + make_interval(secs => p.delay_seconds),
               CASE WHEN p.delay_seconds > 0 THEN v_now + make_interval(secs => p.delay_seconds) END,
               CASE WHEN p.expiration_seconds > 0
                    THEN v_now + make_interval(secs => p.delay_seconds + p.expiration_seconds) END,
               p.max_receive_count, p.dead_letter_queue, p.delay_seconds = 0, p_group_ids[x]
        FROM unnest(v_sent_pos) x
        CROSS JOIN LATERAL (SELECT
            CASE WHEN p_delay_seconds[x] < 0 THEN q.delay_seconds ELSE p_delay_seconds[x] END AS delay_seconds,
            CASE WHEN p_expiration_seconds[x] < 0 THEN q.expiration_seconds ELSE p_expiration_seconds[x] END
                AS expiration_seconds,
            CASE WHEN p_max_receive_counts[x] > 0 THEN p_max_receive_counts[x]
                 WHEN q.max_receive_count > 0 THEN q.max_receive_count
                 ELSE p_server_max_receive_count END AS max_receive_count,
            CASE WHEN p_dead_letter_queue_given[x] THEN p_dead_letter_queues[x] ELSE q.dead_letter_queue END
                AS dead_letter_queue
        ) p
        ORDER BY x
        RETURNING msg.queue_id, msg.message_id, msg.sequence, msg.sent_at, msg.delayed_to, msg.expires_at,
                  msg.visible_at, msg.ready
    ), readied AS (
        INSERT INTO skipq.ready (queue_id, sequence)
        SELECT r.queue_id, r.sequence FROM inserted r WHERE r.ready
    ), timed AS (
        INSERT INTO skipq.timers (due_at, queue_id, sequence)
        SELECT r.visible_at, r.queue_id, r.sequence FROM inserted r WHERE NOT r.ready
    )
    SELECT v_sent_pos[s.k]::integer, s.queue_id, s.message_id, s.sequence, s.sent_at, s.delayed_to,
           s.expires_at, 'sent'::text
    FROM (SELECT r.*, row_number() OVER (ORDER BY r.sequence) AS k FROM inserted r) s;

    IF v_hash IS NOT NULL THEN
        -- The keys of the messages just sent, read back by their ids. A key
        -- still present but no longer live (window over, message gone) is
        -- replaced.
        INSERT INTO skipq.dedup_keys AS d (
            queue_id, message_id, content_hash, sequence, sent_at, delayed_to, expires_at, window_ends,
            result_message_id)
        SELECT m.queue_id, v_keys[x], v_hash[x], m.sequence, m.sent_at, m.delayed_to, m.expires_at,
               m.sent_at + make_interval(secs => q.dedup_window_seconds),
               CASE WHEN v_content[x] OR v_dedup[x] THEN m.message_id END
        FROM generate_subscripts(p_message_ids, 1) x
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m
                            WHERE m.message_id = p_message_ids[x] AND m.queue_id = q.id) m
        WHERE v_keyed[x] AND v_outcome[x] = 'sent'
        ON CONFLICT ON CONSTRAINT dedup_keys_pkey DO UPDATE SET
            content_hash = excluded.content_hash, sequence = excluded.sequence,
            sent_at = excluded.sent_at, delayed_to = excluded.delayed_to,
            expires_at = excluded.expires_at, window_ends = excluded.window_ends,
            result_message_id = excluded.result_message_id;
        -- Duplicates: of a live key (its send), or of an earlier position
        -- (the message it sent just now).
        RETURN QUERY
        SELECT x, q.id, v_dupid[x], coalesce(v_seq[x], m.sequence), coalesce(v_sent[x], m.sent_at),
               CASE WHEN v_seq[x] IS NULL THEN m.delayed_to ELSE v_delayed[x] END,
               CASE WHEN v_seq[x] IS NULL THEN m.expires_at ELSE v_expires[x] END,
               'duplicate'::text
        FROM generate_subscripts(p_message_ids, 1) x
        LEFT JOIN LATERAL (SELECT * FROM skipq.messages m
                           WHERE m.message_id = v_dupid[x] AND m.queue_id = q.id AND v_seq[x] IS NULL) m ON true
        WHERE v_outcome[x] = 'duplicate';
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_insert_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_server_max_receive_count integer, p_message_ids text[], p_keyed boolean[], p_client_ids text[], p_metadatas text[], p_body_binaries boolean[], p_tags text[], p_delay_seconds integer[], p_expiration_seconds integer[], p_max_receive_counts integer[], p_dead_letter_queues text[], p_dead_letter_queue_given boolean[], p_body_offsets integer[], p_body_lengths integer[], p_body_data bytea, p_group_ids text[], p_dedup_ids text[]) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
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
              WHERE r.queue_id = (SELECT q.id FROM skipq.queues q
                                  WHERE q.tenant = p_tenant AND q.name = p_queue AND NOT q.fifo)
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
REVOKE ALL ON FUNCTION skipq.message_claim_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
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
    q        skipq.queues;
    v_groups text[];
    v_heads  bigint[];
    v_now    timestamptz;
    v_until  timestamptz;
    v_seqs   bigint[];
    v_taken  text[];
    v_retain integer;
BEGIN
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT array_agg(s.group_id ORDER BY s.turn), array_agg(s.head ORDER BY s.turn) INTO v_groups, v_heads
    FROM (SELECT g.group_id, g.turn, h.sequence AS head
          FROM skipq.message_groups g
          CROSS JOIN LATERAL (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                              WHERE (h.queue_id::text || '/' || h.group_id) = (g.queue_id::text || '/' || g.group_id)
                                AND h.group_id IS NOT NULL
                              ORDER BY h.sequence LIMIT 1) h
          WHERE g.queue_id = q.id
            AND g.leased_until <= coalesce(p_now, clock_timestamp())
            AND h.ready AND (h.expires_at IS NULL OR h.expires_at > coalesce(p_now, clock_timestamp()))
          ORDER BY g.turn
          LIMIT p_max_messages
          FOR NO KEY UPDATE OF g SKIP LOCKED) s;
    IF v_groups IS NULL THEN
        RETURN;
    END IF;

    WITH t AS MATERIALIZED (
        SELECT coalesce(p_now, clock_timestamp()) AS now
    ), run AS (
        -- One message a group: its first, found by statement 1.
        SELECT x.ord, x.head AS sequence, 1::bigint AS rn
        FROM unnest(v_heads) WITH ORDINALITY AS x(head, ord)
        WHERE p_max_per_group = 1
        UNION ALL
        SELECT x.ord, r.sequence, r.rn
        FROM unnest(v_groups) WITH ORDINALITY AS x(group_id, ord)
        CROSS JOIN LATERAL (
            SELECT h.sequence, row_number() OVER w AS rn,
                   bool_and(h.ready AND (h.expires_at IS NULL OR h.expires_at > (SELECT t.now FROM t))) OVER w AS ok
            FROM (SELECT h.sequence, h.ready, h.expires_at FROM skipq.messages h
                  WHERE (h.queue_id::text || '/' || h.group_id) = (q.id::text || '/' || x.group_id)
                    AND h.group_id IS NOT NULL
                  ORDER BY h.sequence LIMIT p_max_per_group) h
            WINDOW w AS (ORDER BY h.sequence ROWS UNBOUNDED PRECEDING)) r
        WHERE r.ok AND p_max_per_group > 1
    ), locked AS (
        SELECT r.ord, r.rn, c.sequence, c.size
        FROM run r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   CASE WHEN c.body_binary THEN (octet_length(c.body)::bigint + 2) / 3 * 4
                             ELSE octet_length(c.body)::bigint END
                        + octet_length(c.metadata) + octet_length(c.tags::text) + octet_length(c.message_id)
                        + octet_length(c.client_id) + coalesce(octet_length(c.re_routed_from), 0)
                        + octet_length(c.group_id) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = q.id AND c.sequence = r.sequence
              AND c.ready AND (c.expires_at IS NULL OR c.expires_at > (SELECT t.now FROM t))
            FOR UPDATE SKIP LOCKED) c
    ), kept AS (
        SELECT l.ord, l.sequence, l.size
        FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
        WHERE l.k = l.rn
    ), picked AS (
        SELECT w.ord, w.sequence FROM (
            SELECT w.ord, w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
            FROM kept w
            WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
        WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
    )
    SELECT (SELECT t.now FROM t), array_agg(p.sequence ORDER BY p.ord, p.sequence),
           array_agg(DISTINCT v_groups[p.ord])
    INTO v_now, v_seqs, v_taken
    FROM picked p;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;

    IF p_mode = 'peek' THEN
        RETURN QUERY
        SELECT m.* FROM unnest(v_seqs) WITH ORDINALITY AS s(sequence, n)
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m WHERE m.queue_id = q.id AND m.sequence = s.sequence) m
        ORDER BY s.n;
        RETURN;
    END IF;

    v_until := v_now + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
    UPDATE skipq.message_groups g
    SET turn = nextval('skipq.group_turn'),
        leased_until = CASE WHEN p_mode = 'claim' THEN v_until ELSE g.leased_until END
    WHERE g.queue_id = q.id AND g.group_id = ANY(v_taken);

    IF p_mode = 'delete' THEN
        SELECT x.seconds INTO v_retain FROM skipq.queue_retention x WHERE x.queue_id = q.id;
    END IF;
    IF p_mode = 'claim' THEN
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), timed AS (
            INSERT INTO skipq.timers (due_at, queue_id, sequence)
            SELECT v_until, q.id, s.sequence FROM unnest(v_seqs) AS s(sequence)
        ), claimed AS (
            UPDATE skipq.messages m
            SET visible_at        = v_until,
                receive_count     = m.receive_count + 1,
                first_received_at = coalesce(m.first_received_at, v_now),
                lease_token       = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()),
                ready             = false
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        )
        SELECT c.* FROM claimed c ORDER BY array_position(v_seqs, c.sequence);
    ELSIF v_retain IS NOT NULL THEN
        -- autoAck on a queue that keeps acked messages (message_claim_and_delete).
        RETURN QUERY
        SELECT r.* FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
            array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true) r
        ORDER BY array_position(v_seqs, r.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    ELSE
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), gone AS (
            DELETE FROM skipq.messages m
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        )
        SELECT c.* FROM gone c ORDER BY array_position(v_seqs, c.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_claim_grouped_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_and_delete_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
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
    q        skipq.queues;
    v_retain integer;
    v_seqs   bigint[];
BEGIN
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND NOT x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT r.seconds INTO v_retain FROM skipq.queue_retention r WHERE r.queue_id = q.id;
    WITH walked AS (
        SELECT c.sequence, c.size
        FROM (SELECT r.queue_id, r.sequence FROM skipq.ready r WHERE r.queue_id = q.id ORDER BY r.sequence) r
        CROSS JOIN LATERAL (
            SELECT c.sequence,
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + p_message_overhead AS size
            FROM skipq.messages c
            WHERE c.queue_id = r.queue_id AND c.sequence = r.sequence
              AND c.ready
              AND (c.expires_at IS NULL OR c.expires_at > coalesce(p_now, clock_timestamp()))
            FOR UPDATE SKIP LOCKED) c
        LIMIT p_max_messages
    )
    SELECT array_agg(w.sequence) INTO v_seqs FROM (
        SELECT w.sequence, row_number() OVER win AS n, sum(w.size) OVER win - w.size AS before
        FROM walked w
        WINDOW win AS (ORDER BY w.sequence ROWS UNBOUNDED PRECEDING)) w
    WHERE w.n = 1 OR w.before < p_max_response_bytes;
    IF v_seqs IS NULL THEN
        RETURN;
    END IF;
    IF v_retain IS NOT NULL THEN
        RETURN QUERY SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
            array_fill(v_retain, ARRAY[cardinality(v_seqs)]), coalesce(p_now, clock_timestamp()), true);
        RETURN;
    END IF;
    RETURN QUERY
    WITH unready AS (
        DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
    )
    DELETE FROM skipq.messages m
    WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
    RETURNING m.*;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_claim_and_delete_untraced(p_tenant text, p_queue text, p_now timestamp with time zone, p_max_messages integer, p_max_response_bytes bigint, p_message_overhead bigint) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_ack_untraced(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[]) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
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
    v_retain boolean;
    v_gq     bigint[];
    v_gg     text[];
    v_rq     bigint[];
    v_rs     bigint[];
    v_rt     integer[];
BEGIN
    v_retain := EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = ANY(p_queue_ids));
    -- The groups of FIFO messages, read before they change.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                              AND m.group_id IS NOT NULL) m;
    END IF;
    RETURN QUERY
    WITH gone AS (
        DELETE FROM skipq.messages m
        USING (SELECT unnest(p_queue_ids::bigint[]) AS queue_id, unnest(p_sequences) AS sequence,
                unnest(p_tokens) AS token) k
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id OFFSET 0)
          AND (NOT v_retain OR NOT EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = m.queue_id))
        RETURNING m.*
    ), unready AS (
        DELETE FROM skipq.ready r
        WHERE r.ctid = ANY(ARRAY(
            SELECT x.ctid FROM gone g
            CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence) x WHERE g.ready))
    )
    SELECT gone.* FROM gone;
    IF v_retain THEN
        -- FOR UPDATE rechecks the token on the row's latest version: of two
        -- acks of one receipt, the second finds the empty token and
        -- matches nothing.
        SELECT array_agg(m.queue_id), array_agg(m.sequence), array_agg(k.seconds) INTO v_rq, v_rs, v_rt
        FROM (SELECT u.queue_id, u.sequence, u.token, r.seconds
              FROM unnest(p_queue_ids, p_sequences, p_tokens) AS u(queue_id, sequence, token)
              CROSS JOIN LATERAL (SELECT r.seconds FROM skipq.queue_retention r
                                  WHERE r.queue_id = u.queue_id
                                    AND EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = r.queue_id)) r) k
        CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                            FOR UPDATE) m;
        IF v_rq IS NOT NULL THEN
            RETURN QUERY SELECT * FROM skipq.message_retain(v_rq, v_rs, v_rt, clock_timestamp(), false);
        END IF;
    END IF;
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_ack_untraced(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[]) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_set_visibility_untraced(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_visibility_seconds integer[]) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
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
    v_gq bigint[];
    v_gg text[];
BEGIN
    -- The groups of FIFO messages, read before they change.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.group_id FROM skipq.messages m
                            WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
                              AND m.group_id IS NOT NULL) m;
    END IF;
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
          -- A FIFO lease that ran out stays over: its group may be leased
          -- to another receiver already.
          AND (m.group_id IS NULL OR m.visible_at > t.now)
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
    IF v_gq IS NOT NULL THEN
        -- The groups' leases last as long as their longest message's, in
        -- key order after the message locks.
        UPDATE skipq.message_groups x SET leased_until = greatest(x.leased_until, k.until)
        FROM (SELECT m.queue_id, m.group_id, max(m.visible_at) AS until
              FROM unnest(p_queue_ids, p_sequences, p_tokens) AS u(queue_id, sequence, token)
              CROSS JOIN LATERAL (SELECT h.queue_id, h.group_id, h.visible_at FROM skipq.messages h
                                  WHERE h.queue_id = u.queue_id AND h.sequence = u.sequence
                                    AND h.lease_token = u.token AND h.group_id IS NOT NULL) m
              GROUP BY m.queue_id, m.group_id ORDER BY m.queue_id, m.group_id) k
        WHERE x.queue_id = k.queue_id AND x.group_id = k.group_id;
    END IF;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.message_set_visibility_untraced(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_visibility_seconds integer[]) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_prune(p_max integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_q bigint[];
    v_g text[];
    n integer;
BEGIN
    SELECT array_agg(e.queue_id), array_agg(e.group_id) INTO v_q, v_g FROM (
        SELECT x.queue_id, x.group_id FROM skipq.message_groups x
        WHERE CASE WHEN NOT skipq.group_has_messages(x.queue_id, x.group_id)
                   THEN pg_try_advisory_xact_lock(skipq.group_lock_key(x.queue_id, x.group_id)) ELSE false END
        LIMIT p_max
        FOR UPDATE SKIP LOCKED) e;
    IF v_q IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM skipq.message_groups x
    USING unnest(v_q, v_g) AS k(q, g)
    WHERE x.queue_id = k.q AND x.group_id = k.g
      AND NOT skipq.group_has_messages(k.q, k.g);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION skipq.group_prune(p_max integer) FROM PUBLIC;
