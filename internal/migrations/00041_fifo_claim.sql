-- +goose Up
-- FIFO receives and settles whose cost no longer depends on the statistics
-- their plans were made with, and a receive that a held head cannot empty.
--
-- skipq.group_release (every FIFO ack, nack, release, requeue, dead-letter
-- and autoAck ends with it) joined the given groups to skipq.message_groups
-- by key in a DELETE and an UPDATE. Its plans are generic and kept for a
-- connection's life; made while the table's statistics said it was empty
-- (a fresh database, a vacuum of an idle table), they walked every group of
-- every queue once per given group and ran the in-flight probe for each
-- pair: an ack of 300 messages read 262,000 buffers (2.8 s) with 900
-- groups, and the FIFO lifecycle at batch 100 x 4 fell to 67-100 msgs/s in
-- such runs. It now locks the rows one by one, in key order, and names
-- them by address in the statements after: a TID scan is their only plan,
-- and a row a transaction holds locked keeps its address. A probe by key
-- is no cure by itself: on statistics that say "one row", every index that
-- leads with the queue id costs the same, and one that walks all of the
-- queue's rows may win (a lookup of a group walked message_groups_turn_idx
-- over the queue's 1,000 groups; a message's, messages_queue_sent_idx over
-- its messages). So a group row is found by a range probe on the primary
-- key in its order, which no other index can serve without a sort (sorts
-- are off), and skipq.message_claim_grouped locks each message at the
-- address its walk of messages_group_idx found it (then checks its key)
-- and updates the groups and messages it took by address. group_release
-- also probes each group's first ten messages once, for "empty" and "in
-- flight" together, where it called group_has_messages and then probed
-- again. skipq.message_ack reads the
-- groups of the messages it acks with such a range probe too (its plain
-- join was flattened and walked every grouped message per handle); its
-- standard part, the DELETE by key, is as it was.
--
-- skipq.message_claim_grouped also takes a second pass when a group it
-- chose gave nothing because another transaction holds its first message
-- (an SQL consumer's FOR UPDATE, a late settle): the pass walks the groups
-- behind those tried, only then, so the common receive walks once. Before,
-- a receive of one message answered empty while another group was ready.
--
-- Signatures and results are unchanged; the Down restores the previous
-- bodies.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_release(p_queue_ids bigint[], p_group_ids text[]) RETURNS TABLE(queue_id bigint, freed integer)
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
#variable_conflict use_column
DECLARE
    v_q     bigint[];
    v_g     text[];
    v_rows  tid[];
    v_empty tid[];
    v_free  tid[];
BEGIN
    -- Called after messages of the given groups left flight or the queue:
    -- deletes the groups left empty and ends the lease of the others that
    -- have nothing in flight. Returns, per queue, how many groups it made
    -- receivable again.
    SELECT array_agg(k.q ORDER BY k.q, k.g), array_agg(k.g ORDER BY k.q, k.g) INTO v_q, v_g
    FROM (SELECT DISTINCT u.q, u.g FROM unnest(p_queue_ids, p_group_ids) AS u(q, g) WHERE u.g IS NOT NULL) k;
    IF v_q IS NULL THEN
        RETURN;
    END IF;
    -- The rows locked in key order, each found by a range probe that only
    -- the primary key can serve in order (with sorts off, no other index
    -- competes) and locked by its address (an update since is followed to
    -- the newest version, whose key is checked). Their addresses cannot
    -- change while this transaction holds them, and the statements below
    -- name the rows by address: a TID scan is their only plan. Plans here
    -- are generic and kept for a connection's life: joined to the arrays
    -- by key, one made while the table's statistics said it was nearly
    -- empty walked every group of every queue once per array element, and
    -- a probe by key could as well walk message_groups_turn_idx over all
    -- of the queue's groups.
    SELECT array_agg(x.ctid) INTO v_rows
    FROM unnest(v_q, v_g) AS k(q, g)
    CROSS JOIN LATERAL (SELECT x.ctid FROM skipq.message_groups x
                        WHERE x.ctid = (SELECT y.ctid FROM skipq.message_groups y
                                        WHERE (y.queue_id, y.group_id) >= (k.q, k.g)
                                        ORDER BY y.queue_id, y.group_id LIMIT 1)
                          AND x.queue_id = k.q AND x.group_id = k.g
                        FOR UPDATE) x;
    IF v_rows IS NULL THEN
        RETURN;
    END IF;

    -- One probe of each group's first ten messages, in a statement after
    -- the locks (so it sees a settle of the same group that committed
    -- while this one waited): is the group empty, is anything of it in
    -- flight. No claim can take the group while its row is held, so the
    -- judgement stands for the statements below. Empty groups are deleted
    -- once their advisory lock is try-locked (a sender holding it will add
    -- a message); the others with nothing in flight get their lease ended.
    SELECT array_agg(x.ctid) FILTER (
               WHERE CASE WHEN NOT f.has_messages
                          THEN pg_try_advisory_xact_lock(skipq.group_lock_key(x.queue_id, x.group_id)) ELSE false END),
           array_agg(x.ctid) FILTER (WHERE NOT f.in_flight)
    INTO v_empty, v_free
    FROM skipq.message_groups x
    CROSS JOIN LATERAL (
        SELECT count(*) > 0 AS has_messages,
               coalesce(bool_or(h.lease_token IS NOT NULL AND h.visible_at > clock_timestamp()), false) AS in_flight
        FROM (SELECT h.lease_token, h.visible_at FROM skipq.messages h
              WHERE (h.queue_id::text || '/' || h.group_id) = (x.queue_id::text || '/' || x.group_id)
                AND h.group_id IS NOT NULL
              ORDER BY h.sequence LIMIT 10) h) f
    WHERE x.ctid = ANY(v_rows);
    IF v_empty IS NOT NULL THEN
        -- A new snapshot, taken after the try-locks: a sender that held
        -- one committed before, and its message is seen here (that group
        -- stays, and its lease is ended below: nothing of it is in flight).
        DELETE FROM skipq.message_groups x
        WHERE x.ctid = ANY(v_empty)
          AND NOT skipq.group_has_messages(x.queue_id, x.group_id);
    END IF;

    -- The rows just deleted are gone for this statement.
    RETURN QUERY
    WITH freed AS (
        UPDATE skipq.message_groups x SET leased_until = '-infinity'
        WHERE x.ctid = ANY(v_free) AND x.leased_until > clock_timestamp()
        RETURNING x.queue_id
    )
    SELECT f.queue_id, count(*)::integer FROM freed f GROUP BY f.queue_id;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint DEFAULT NULL::bigint) RETURNS SETOF skipq.messages
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
    v_now     timestamptz := coalesce(p_now, clock_timestamp());
    v_until   timestamptz;
    v_pass    integer := 0;
    v_groups  text[];            -- a pass's groups, in rotation order
    v_heads   bigint[];          -- their first messages
    v_head_rows tid[];           -- and where they are
    v_rows    tid[];             -- their rows, locked
    v_tried   text[] := '{}';    -- every group a pass locked
    v_got     bigint[];          -- a pass's messages, in answer order
    v_got_msgs tid[];            -- their rows, locked
    v_got_groups text[];
    v_got_rows tid[];
    v_got_bytes bigint;
    v_kept    integer;           -- a pass's messages locked
    v_served  integer;           -- a pass's groups that gave a message
    v_seqs    bigint[] := '{}';  -- the answer
    v_msgs    tid[] := '{}';     -- its rows
    v_taken   text[] := '{}';    -- its groups
    v_taken_rows tid[] := '{}';  -- their rows
    v_bytes   bigint := 0;       -- its estimated size
    v_retain  integer;
BEGIN
    -- A receive on a FIFO queue (p_mode 'claim', 'delete' for autoAck,
    -- 'peek'): up to p_max_messages messages, at most p_max_per_group from
    -- each receivable group, groups in rotation order, within the response
    -- budget (skipq.message_wire_size, the group id and p_message_overhead
    -- per message; the first always fits). Rows come back in answer order.
    -- A pass locks receivable groups' rows (SKIP LOCKED) with their heads,
    -- then each group's run of messages (SKIP LOCKED). A group whose head
    -- another transaction holds gives nothing; when that left the answer
    -- short, a second pass tries the groups behind the ones tried, so a
    -- held head does not empty a receive that other groups can fill (a
    -- pass that walks only when needed: locking every head in the walk
    -- cost most of the claim's throughput). A claim then leases the groups
    -- and moves them to the back of the rotation, an autoAck releases
    -- them. On a traced queue each message gets its 'received' event (and
    -- 'acked' for autoAck), under p_key_id.
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    LOOP
        v_pass := v_pass + 1;
        SELECT array_agg(s.group_id ORDER BY s.turn), array_agg(s.head ORDER BY s.turn),
               array_agg(s.head_row ORDER BY s.turn), array_agg(s.row ORDER BY s.turn)
        INTO v_groups, v_heads, v_head_rows, v_rows
        FROM (SELECT g.group_id, g.turn, g.ctid AS row, h.sequence AS head, h.ctid AS head_row
              FROM skipq.message_groups g
              CROSS JOIN LATERAL (SELECT h.sequence, h.ctid, h.ready, h.expires_at FROM skipq.messages h
                                  WHERE (h.queue_id::text || '/' || h.group_id) = (g.queue_id::text || '/' || g.group_id)
                                    AND h.group_id IS NOT NULL
                                  ORDER BY h.sequence LIMIT 1) h
              WHERE g.queue_id = q.id
                AND g.leased_until <= v_now
                AND h.ready AND (h.expires_at IS NULL OR h.expires_at > v_now)
                AND g.group_id <> ALL(v_tried)
              ORDER BY g.turn
              LIMIT p_max_messages - cardinality(v_seqs)
              FOR NO KEY UPDATE OF g SKIP LOCKED) s;
        EXIT WHEN v_groups IS NULL;

        WITH run AS (
            -- One message a group: its first, found above.
            SELECT x.ord, x.head AS sequence, x.head_row AS row, 1::bigint AS rn
            FROM unnest(v_heads, v_head_rows) WITH ORDINALITY AS x(head, head_row, ord)
            WHERE p_max_per_group = 1
            UNION ALL
            SELECT x.ord, r.sequence, r.row, r.rn
            FROM unnest(v_groups) WITH ORDINALITY AS x(group_id, ord)
            CROSS JOIN LATERAL (
                SELECT h.sequence, h.ctid AS row, row_number() OVER w AS rn,
                       bool_and(h.ready AND (h.expires_at IS NULL OR h.expires_at > v_now)) OVER w AS ok
                FROM (SELECT h.ctid, h.sequence, h.ready, h.expires_at FROM skipq.messages h
                      WHERE (h.queue_id::text || '/' || h.group_id) = (q.id::text || '/' || x.group_id)
                        AND h.group_id IS NOT NULL
                      ORDER BY h.sequence LIMIT p_max_per_group) h
                WINDOW w AS (ORDER BY h.sequence ROWS UNBOUNDED PRECEDING)) r
            WHERE r.ok AND p_max_per_group > 1
        ), locked AS (
            -- Each message by the address the walk saw it at: a TID scan
            -- whatever the statistics say (a probe by key could as well
            -- walk another index that leads with queue_id). A newer
            -- version is followed and rechecked; a slot reused since by
            -- another row fails the key check.
            SELECT r.ord, r.rn, c.row, c.sequence, c.size
            FROM run r
            CROSS JOIN LATERAL (
                SELECT c.ctid AS row, c.sequence,
                       skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                           c.client_id, c.re_routed_from) + octet_length(c.group_id) + p_message_overhead AS size
                FROM skipq.messages c
                WHERE c.ctid = r.row AND c.queue_id = q.id AND c.sequence = r.sequence
                  AND c.ready AND (c.expires_at IS NULL OR c.expires_at > v_now)
                FOR UPDATE SKIP LOCKED) c
        ), kept AS (
            SELECT l.ord, l.row, l.sequence, l.size
            FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
            WHERE l.k = l.rn
        ), picked AS (
            -- The budget counts what earlier passes took.
            SELECT w.ord, w.row, w.sequence, w.size FROM (
                SELECT w.ord, w.row, w.sequence, w.size, row_number() OVER win + cardinality(v_seqs) AS n,
                       sum(w.size) OVER win - w.size + v_bytes AS before
                FROM kept w
                WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
            WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
        )
        SELECT (SELECT array_agg(p.sequence ORDER BY p.ord, p.sequence) FROM picked p),
               (SELECT array_agg(p.row ORDER BY p.ord, p.sequence) FROM picked p),
               (SELECT array_agg(DISTINCT v_groups[p.ord]) FROM picked p),
               (SELECT array_agg(DISTINCT v_rows[p.ord]) FROM picked p),
               (SELECT coalesce(sum(p.size), 0) FROM picked p),
               (SELECT count(*) FROM kept), (SELECT count(DISTINCT k.ord) FROM kept k)
        INTO v_got, v_got_msgs, v_got_groups, v_got_rows, v_got_bytes, v_kept, v_served;
        v_seqs := v_seqs || coalesce(v_got, '{}');
        v_msgs := v_msgs || coalesce(v_got_msgs, '{}');
        v_taken := v_taken || coalesce(v_got_groups, '{}');
        v_taken_rows := v_taken_rows || coalesce(v_got_rows, '{}');
        v_bytes := v_bytes + v_got_bytes;
        v_tried := v_tried || v_groups;
        -- Another pass only for groups that gave nothing (a head held
        -- elsewhere), while the answer has room in count and budget.
        EXIT WHEN v_pass = 2 OR v_served = cardinality(v_groups) OR coalesce(cardinality(v_got), 0) < v_kept
               OR cardinality(v_seqs) >= p_max_messages;
    END LOOP;
    IF cardinality(v_seqs) = 0 THEN
        RETURN;
    END IF;

    IF p_mode = 'peek' THEN
        RETURN QUERY
        SELECT m.* FROM unnest(v_msgs) WITH ORDINALITY AS s(row, n)
        CROSS JOIN LATERAL (SELECT * FROM skipq.messages m WHERE m.ctid = s.row) m
        ORDER BY s.n;
        RETURN;
    END IF;

    v_until := v_now + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
    -- By the rows' addresses (locked above, so they stay put): a TID scan
    -- whatever the statistics say.
    UPDATE skipq.message_groups g
    SET turn = nextval('skipq.group_turn'),
        leased_until = CASE WHEN p_mode = 'claim' THEN v_until ELSE g.leased_until END
    WHERE g.ctid = ANY(v_taken_rows);

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
            WHERE m.ctid = ANY(v_msgs)
            RETURNING m.*
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM claimed r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM claimed c ORDER BY array_position(v_seqs, c.sequence);
    ELSIF v_retain IS NOT NULL THEN
        -- autoAck on a queue that keeps acked messages (message_claim_and_delete).
        RETURN QUERY
        WITH retained AS (
            SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
                array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true)
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM retained r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT r.* FROM retained r ORDER BY array_position(v_seqs, r.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    ELSE
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), gone AS (
            DELETE FROM skipq.messages m
            WHERE m.ctid = ANY(v_msgs)
            RETURNING m.*
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   CASE WHEN e.n = 2 THEN v_now END
            FROM gone r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM gone c ORDER BY array_position(v_seqs, c.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_ack(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_key_ids bigint[] DEFAULT NULL::bigint[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF skipq.messages
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
    -- Acks receipts (p_queue_ids, p_sequences, p_tokens: the handles'
    -- parts): deletes each message whose lease the token still holds, or
    -- retains it on a queue with retainAckedSeconds (skipq.message_retain),
    -- releases the FIFO groups left with nothing in flight, and returns the
    -- rows acked. On a traced queue each gets its 'acked' event under its
    -- handle's API key (p_key_ids), gone at once unless retained.
    v_retain := EXISTS (SELECT 1 FROM skipq.queue_retention r WHERE r.queue_id = ANY(p_queue_ids));
    -- The groups of FIFO messages, read before they change. Each message
    -- by a range probe that only the primary key serves in its order (sorts
    -- are off), its key checked after: a plain join by key is flattened,
    -- and on statistics that say "one row" was planned as a walk of every
    -- grouped message per handle; a probe by key could as well walk
    -- messages_queue_sent_idx over all of the queue's messages.
    IF EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = ANY(p_queue_ids) AND q.fifo) THEN
        SELECT array_agg(m.queue_id), array_agg(m.group_id) INTO v_gq, v_gg
        FROM unnest(p_queue_ids, p_sequences, p_tokens) AS k(queue_id, sequence, token)
        CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence, m.group_id, m.lease_token FROM skipq.messages m
                            WHERE (m.queue_id, m.sequence) >= (k.queue_id, k.sequence)
                            ORDER BY m.queue_id, m.sequence LIMIT 1) m
        WHERE m.queue_id = k.queue_id AND m.sequence = k.sequence AND m.lease_token = k.token
          AND m.group_id IS NOT NULL;
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
    ), keys AS (
        -- Each handle's API key by its message's sequence (unique across
        -- queues); read, and so built, only for traced rows.
        SELECT jsonb_object_agg(u.s::text, u.k) AS map
        FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, 'acked', coalesce(p_now, now()),
               (SELECT (k.map->>g.sequence::text)::bigint FROM keys k), NULL, coalesce(p_now, now())
        FROM gone g WHERE g.tags ? 'skipq.trace'
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
            -- A retained message is gone when its retention ends (MessageDeleteExpired).
            RETURN QUERY
            WITH r AS (
                SELECT * FROM skipq.message_retain(v_rq, v_rs, v_rt, clock_timestamp(), false)
            ), keys AS (
            -- Each handle's API key by its message's sequence (unique across
            -- queues); read, and so built, only for traced rows.
            SELECT jsonb_object_agg(u.s::text, u.k) AS map
            FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
        ), traced AS (
                INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
                SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'acked', coalesce(p_now, now()),
                       (SELECT (k.map->>r.sequence::text)::bigint FROM keys k), NULL, NULL
                FROM r WHERE r.tags ? 'skipq.trace'
            )
            SELECT * FROM r;
        END IF;
    END IF;
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.group_release(p_queue_ids bigint[], p_group_ids text[]) RETURNS TABLE(queue_id bigint, freed integer)
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
#variable_conflict use_column
DECLARE
    v_q  bigint[];
    v_g  text[];
    v_eq bigint[];
    v_eg text[];
BEGIN
    SELECT array_agg(k.q ORDER BY k.q, k.g), array_agg(k.g ORDER BY k.q, k.g) INTO v_q, v_g
    FROM (SELECT DISTINCT u.q, u.g FROM unnest(p_queue_ids, p_group_ids) AS u(q, g) WHERE u.g IS NOT NULL) k;
    IF v_q IS NULL THEN
        RETURN;
    END IF;
    PERFORM 1 FROM unnest(v_q, v_g) AS k(q, g)
    CROSS JOIN LATERAL (SELECT 1 FROM skipq.message_groups x
                        WHERE x.queue_id = k.q AND x.group_id = k.g FOR UPDATE) x;

    -- Groups left empty go first: no lease to end on a row about to go.
    SELECT array_agg(k.q), array_agg(k.g) INTO v_eq, v_eg
    FROM unnest(v_q, v_g) AS k(q, g)
    WHERE CASE WHEN NOT skipq.group_has_messages(k.q, k.g)
               THEN pg_try_advisory_xact_lock(skipq.group_lock_key(k.q, k.g)) ELSE false END;
    IF v_eq IS NOT NULL THEN
        -- A new snapshot, taken after the try-locks: a sender that held
        -- one committed before, and its message is seen here.
        DELETE FROM skipq.message_groups x
        USING unnest(v_eq, v_eg) AS k(q, g)
        WHERE x.queue_id = k.q AND x.group_id = k.g
          AND NOT skipq.group_has_messages(k.q, k.g);
    END IF;

    -- The others (the rows just deleted are gone for this statement).
    RETURN QUERY
    WITH freed AS (
        UPDATE skipq.message_groups x SET leased_until = '-infinity'
        FROM unnest(v_q, v_g) AS k(q, g)
        WHERE x.queue_id = k.q AND x.group_id = k.g
          AND x.leased_until > clock_timestamp()
          AND NOT EXISTS (
              SELECT 1 FROM (SELECT h.lease_token, h.visible_at FROM skipq.messages h
                             WHERE (h.queue_id::text || '/' || h.group_id) = (k.q::text || '/' || k.g)
                               AND h.group_id IS NOT NULL
                             ORDER BY h.sequence LIMIT 10) h
              WHERE h.lease_token IS NOT NULL AND h.visible_at > clock_timestamp())
        RETURNING x.queue_id
    )
    SELECT f.queue_id, count(*)::integer FROM freed f GROUP BY f.queue_id;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint DEFAULT NULL::bigint) RETURNS SETOF skipq.messages
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
    -- A receive on a FIFO queue (p_mode 'claim', 'delete' for autoAck,
    -- 'peek'): up to p_max_messages messages, at most p_max_per_group from
    -- each receivable group, groups in rotation order, within the response
    -- budget (skipq.message_wire_size, the group id and p_message_overhead
    -- per message; the first always fits). Rows come back in answer order.
    -- Statement 1 locks the receivable groups' rows (SKIP LOCKED) with their
    -- heads; statement 2 locks each group's run of messages; a claim then
    -- leases the groups and moves them to the back of the rotation, an
    -- autoAck releases them. On a traced queue each message gets its
    -- 'received' event (and 'acked' for autoAck), under p_key_id.
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
                   skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                       c.client_id, c.re_routed_from) + octet_length(c.group_id) + p_message_overhead AS size
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
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM claimed r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM claimed c ORDER BY array_position(v_seqs, c.sequence);
    ELSIF v_retain IS NOT NULL THEN
        -- autoAck on a queue that keeps acked messages (message_claim_and_delete).
        RETURN QUERY
        WITH retained AS (
            SELECT * FROM skipq.message_retain(array_fill(q.id, ARRAY[cardinality(v_seqs)]), v_seqs,
                array_fill(v_retain, ARRAY[cardinality(v_seqs)]), v_now, true)
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   NULL::timestamptz
            FROM retained r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT r.* FROM retained r ORDER BY array_position(v_seqs, r.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    ELSE
        RETURN QUERY
        WITH unready AS (
            DELETE FROM skipq.ready r WHERE r.queue_id = q.id AND r.sequence = ANY(v_seqs)
        ), gone AS (
            DELETE FROM skipq.messages m
            WHERE m.queue_id = q.id AND m.sequence = ANY(v_seqs)
            RETURNING m.*
        ), traced AS (
            INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
            SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, e.type, v_now, p_key_id,
                   CASE WHEN e.n = 1 THEN jsonb_build_object('receiveCount', r.receive_count, 'visibleUntil', r.visible_at) END,
                   CASE WHEN e.n = 2 THEN v_now END
            FROM gone r CROSS JOIN (VALUES (1, 'received'), (2, 'acked')) e(n, type)
            WHERE r.tags ? 'skipq.trace' AND (e.n = 1 OR p_mode = 'delete')
            ORDER BY r.sequence, e.n
        )
        SELECT c.* FROM gone c ORDER BY array_position(v_seqs, c.sequence);
        PERFORM skipq.group_release(array_fill(q.id, ARRAY[cardinality(v_taken)]), v_taken);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_ack(p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_key_ids bigint[] DEFAULT NULL::bigint[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF skipq.messages
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
    -- Acks receipts (p_queue_ids, p_sequences, p_tokens: the handles'
    -- parts): deletes each message whose lease the token still holds, or
    -- retains it on a queue with retainAckedSeconds (skipq.message_retain),
    -- releases the FIFO groups left with nothing in flight, and returns the
    -- rows acked. On a traced queue each gets its 'acked' event under its
    -- handle's API key (p_key_ids), gone at once unless retained.
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
    ), keys AS (
        -- Each handle's API key by its message's sequence (unique across
        -- queues); read, and so built, only for traced rows.
        SELECT jsonb_object_agg(u.s::text, u.k) AS map
        FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
    ), traced AS (
        INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
        SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, 'acked', coalesce(p_now, now()),
               (SELECT (k.map->>g.sequence::text)::bigint FROM keys k), NULL, coalesce(p_now, now())
        FROM gone g WHERE g.tags ? 'skipq.trace'
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
            -- A retained message is gone when its retention ends (MessageDeleteExpired).
            RETURN QUERY
            WITH r AS (
                SELECT * FROM skipq.message_retain(v_rq, v_rs, v_rt, clock_timestamp(), false)
            ), keys AS (
            -- Each handle's API key by its message's sequence (unique across
            -- queues); read, and so built, only for traced rows.
            SELECT jsonb_object_agg(u.s::text, u.k) AS map
            FROM unnest(p_sequences, p_key_ids) AS u(s, k) WHERE u.k IS NOT NULL
        ), traced AS (
                INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail, gone_at)
                SELECT (r.tags->>'skipq.trace')::bigint, r.queue_id, r.message_id, 'acked', coalesce(p_now, now()),
                       (SELECT (k.map->>r.sequence::text)::bigint FROM keys k), NULL, NULL
                FROM r WHERE r.tags ? 'skipq.trace'
            )
            SELECT * FROM r;
        END IF;
    END IF;
    IF v_gq IS NOT NULL THEN
        PERFORM skipq.group_release(v_gq, v_gg);
    END IF;
END $$;
-- +goose StatementEnd
