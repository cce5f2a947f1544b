-- +goose Up
-- The FIFO claim (message_claim_grouped) in fewer statements, and the SQL
-- API's receipt handles without translate():
--
-- The FIFO claim:
--
-- With maxMessagesPerGroup 1 (one message a group, each group's head) a
-- pass is one statement: the walk of the rotation locks each group, then a
-- lateral join locks the head the walk found, where the walk and the pass
-- were two statements and the pass carried the plan of longer runs too,
-- started on every call. Longer runs keep the two statements.
--
-- A claim leases its groups and moves them to the back of the rotation in
-- its claim statement (a CTE), not in a statement of its own; autoAck
-- still moves them with an update of its own before it releases them.
--
-- Memoize is off for the function: the planner put a Memoize node over
-- the walk's probe of each group's head and over the pass's lock of each
-- message by address, whose keys never repeat within a call (each group
-- and each message once), so it only copied every row into its cache.
--
-- The SQL API's receipt handles are turned between base64 and base64url
-- with replace() instead of translate() (skipq.receive, receipt_parse,
-- receipts_parse): in a UTF-8 database translate() measured every
-- character of the handle against both sets, about 10,000 instructions a
-- handle each way; a SQL consumer's receive and ack of 100 cost 19.9 M
-- instructions, 2.0 M of them in translate(). Same handles.
--
-- Same signatures, same rows. The Down restores the previous bodies.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.message_claim_grouped(p_tenant text, p_queue text, p_now timestamp with time zone, p_visibility_seconds integer, p_max_messages integer, p_max_per_group integer, p_max_response_bytes bigint, p_message_overhead bigint, p_mode text, p_key_id bigint DEFAULT NULL::bigint) RETURNS SETOF skipq.messages
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_memoize TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    q         skipq.queues;
    v_now     timestamptz := coalesce(p_now, clock_timestamp());
    v_until   timestamptz;
    v_pass    integer := 0;
    v_per     integer := greatest(p_max_per_group, 1);
    v_room    integer;           -- messages the answer still has room for
    v_limit   integer;           -- a pass's groups at most
    v_full_passes integer := 0;  -- passes that took as many groups as the room
    v_groups  text[];            -- a pass's groups, in rotation order
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
    v_secret  bytea;             -- the claim's secret: its tokens come from it
BEGIN
    -- A receive on a FIFO queue (p_mode 'claim', 'delete' for autoAck,
    -- 'peek'): up to p_max_messages messages, at most p_max_per_group from
    -- each receivable group, groups in rotation order, within the response
    -- budget (skipq.message_wire_size, the group id and p_message_overhead
    -- per message; the first always fits). Rows come back in answer order.
    -- A pass locks receivable groups' rows (SKIP LOCKED) with their heads,
    -- then each group's run of messages (SKIP LOCKED). The first pass locks
    -- as many groups as full runs need, not as many as the answer has room
    -- for messages: every row it locks stays locked to the commit, and
    -- other receivers pass it over. When runs were shorter, a second pass
    -- tries the groups behind the ones tried, as many as the room (each
    -- gives at least one message). A group whose head another transaction
    -- holds gives nothing; when that left the answer short after a pass of
    -- that size, one more pass tries the groups behind, so a held head
    -- does not empty a receive that other groups can fill (a pass that
    -- walks only when needed: locking every head in the walk cost most of
    -- the claim's throughput). A claim then leases the groups
    -- and moves them to the back of the rotation, an autoAck releases
    -- them. On a traced queue each message gets its 'received' event (and
    -- 'acked' for autoAck), under p_key_id.
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    LOOP
        v_pass := v_pass + 1;
        v_room := p_max_messages - cardinality(v_seqs);
        -- The first pass takes as many groups as full runs need; the next
        -- ones as many as the room, as a group gives at least one message.
        v_limit := CASE WHEN v_pass = 1 THEN (v_room + v_per - 1) / v_per ELSE v_room END;
        IF v_limit = v_room THEN
            v_full_passes := v_full_passes + 1;
        END IF;
        IF p_max_per_group = 1 THEN
            -- One message a group, its head: the walk and the pass in one
            -- statement. Each group is locked (the walk's LockRows, under
            -- its LIMIT) before the lateral join locks its head, as the
            -- two statements below do for longer runs. The walk is written
            -- twice on purpose: one statement for both run lengths (their
            -- runs a UNION ALL under one-time filters) cost a claim of one
            -- 13 % more, as every call started the plan of both.
            WITH walked AS (
                SELECT g.group_id, g.turn, g.ctid AS row, h.sequence AS head, h.ctid AS head_row
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
                LIMIT v_limit
                FOR NO KEY UPDATE OF g SKIP LOCKED
            ), locked AS (
                -- Each head by the address the walk saw it at, as the
                -- pass's locked below.
                SELECT w.turn, w.group_id, w.row AS group_row, c.row, c.sequence, c.size
                FROM walked w
                CROSS JOIN LATERAL (
                    SELECT c.ctid AS row, c.sequence,
                           skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                               c.client_id, c.re_routed_from) + octet_length(c.group_id) + p_message_overhead AS size
                    FROM skipq.messages c
                    WHERE c.ctid = w.head_row AND c.queue_id = q.id AND c.sequence = w.head
                      AND c.ready AND (c.expires_at IS NULL OR c.expires_at > v_now)
                    FOR UPDATE SKIP LOCKED) c
            ), picked AS (
                -- The budget counts what earlier passes took.
                SELECT l.turn, l.group_id, l.group_row, l.row, l.sequence, l.size FROM (
                    SELECT l.*, row_number() OVER win + cardinality(v_seqs) AS n,
                           sum(l.size::float8) OVER win - l.size + v_bytes AS before
                    FROM locked l
                    WINDOW win AS (ORDER BY l.turn ROWS UNBOUNDED PRECEDING)) l
                WHERE l.n <= p_max_messages AND (l.n = 1 OR l.before < p_max_response_bytes)
            )
            SELECT w.*, p.*, k.n, k.n
            FROM (SELECT array_agg(w.group_id ORDER BY w.turn) FROM walked w) w,
                 (SELECT array_agg(p.sequence ORDER BY p.turn), array_agg(p.row ORDER BY p.turn),
                         array_agg(p.group_id ORDER BY p.turn), array_agg(p.group_row ORDER BY p.turn),
                         coalesce(sum(p.size), 0)
                  FROM picked p) p,
                 (SELECT count(*) AS n FROM locked) k
            INTO v_groups, v_got, v_got_msgs, v_got_groups, v_got_rows, v_got_bytes, v_kept, v_served;
            EXIT WHEN v_groups IS NULL;
        ELSE
            SELECT array_agg(s.group_id ORDER BY s.turn), array_agg(s.row ORDER BY s.turn)
            INTO v_groups, v_rows
            FROM (SELECT g.group_id, g.turn, g.ctid AS row
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
                  LIMIT v_limit
                  FOR NO KEY UPDATE OF g SKIP LOCKED) s;
            EXIT WHEN v_groups IS NULL;

            WITH run AS (
                -- Each group's run: its first messages while they are ready.
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
                WHERE r.ok
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
                -- k = 1: the group's first message, so a group served.
                SELECT l.ord, l.row, l.sequence, l.size, l.k
                FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
                WHERE l.k = l.rn
            ), picked AS (
                -- The budget counts what earlier passes took.
                SELECT w.ord, w.row, w.sequence, w.size, w.k FROM (
                    SELECT w.ord, w.row, w.sequence, w.size, w.k, row_number() OVER win + cardinality(v_seqs) AS n,
                           sum(w.size::float8) OVER win - w.size + v_bytes AS before
                    FROM kept w
                    WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
                WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
            )
            SELECT p.*, k.*
            FROM (SELECT array_agg(p.sequence ORDER BY p.ord, p.sequence), array_agg(p.row ORDER BY p.ord, p.sequence),
                         array_agg(v_groups[p.ord]) FILTER (WHERE p.k = 1), array_agg(v_rows[p.ord]) FILTER (WHERE p.k = 1),
                         coalesce(sum(p.size), 0)
                  FROM picked p) p,
                 (SELECT count(*), count(*) FILTER (WHERE k.k = 1) FROM kept k) k
            INTO v_got, v_got_msgs, v_got_groups, v_got_rows, v_got_bytes, v_kept, v_served;
        END IF;
        v_seqs := v_seqs || coalesce(v_got, '{}');
        v_msgs := v_msgs || coalesce(v_got_msgs, '{}');
        v_taken := v_taken || coalesce(v_got_groups, '{}');
        v_taken_rows := v_taken_rows || coalesce(v_got_rows, '{}');
        v_bytes := v_bytes + v_got_bytes;
        v_tried := v_tried || v_groups;
        -- Another pass while the answer has room in count and budget: after
        -- a first pass whose groups gave short runs (it found as many
        -- groups as it looked for), or for groups that gave nothing (a
        -- head held elsewhere), at most once after a pass that took as
        -- many groups as the room.
        EXIT WHEN cardinality(v_seqs) >= p_max_messages OR coalesce(cardinality(v_got), 0) < v_kept
               OR v_served = cardinality(v_groups) AND (v_limit = v_room OR cardinality(v_groups) < v_limit)
               OR v_full_passes = 2;
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

    IF p_mode = 'delete' THEN
        -- The groups move to the back of the rotation (a claim's statement
        -- below leases them too), by the rows' addresses (locked above, so
        -- they stay put): a TID scan whatever the statistics say.
        UPDATE skipq.message_groups g SET turn = nextval('skipq.group_turn') WHERE g.ctid = ANY(v_taken_rows);
        SELECT x.seconds INTO v_retain FROM skipq.queue_retention x WHERE x.queue_id = q.id;
    END IF;
    IF p_mode = 'claim' THEN
        -- The lease starts now, after the statements above chose the messages:
        -- v_now was read at the call's start, and a message readied in between
        -- (its delay just ended) would get a lease dated before it was
        -- available.
        v_until := coalesce(p_now, clock_timestamp()) + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
        -- One secret of 244 random bits a claim, stored nowhere but as the
        -- token of a claim of one message; each message's token is
        -- SHA-256 of it and the message's sequence, as message_claim's
        -- (DESIGN.md, "Receipt handles").
        v_secret := uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid());
        RETURN QUERY
        WITH unready AS (
            -- Each ready row by a probe of its key that a plan cannot
            -- flatten into a join (LIMIT 1), deleted at the address found:
            -- `queue_id = q.id AND sequence = ANY(v_seqs)`, planned on a
            -- drained table's statistics, kept the sequences as a filter
            -- over a walk of all of the queue's ready rows. Every statement
            -- that changes a FIFO message's ready row locks the message
            -- first, as this claim did, so the row stays where the probe
            -- found it.
            DELETE FROM skipq.ready r
            WHERE r.ctid = ANY(ARRAY(
                SELECT x.ctid FROM unnest(v_seqs) AS s(sequence)
                CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                    WHERE y.queue_id = q.id AND y.sequence = s.sequence LIMIT 1) x))
        ), leased AS (
            -- The groups, leased and moved to the back of the rotation, by
            -- their rows' addresses as autoAck's update above.
            UPDATE skipq.message_groups g SET turn = nextval('skipq.group_turn'), leased_until = v_until
            WHERE g.ctid = ANY(v_taken_rows)
        ), timed AS (
            -- One timer for the claim's messages, due when their lease
            -- ends: the worker fires each of them that is still due then.
            INSERT INTO skipq.timer_sets (due_at, queue_id, sequences) VALUES (v_until, q.id, v_seqs)
        ), claimed AS (
            UPDATE skipq.messages m
            SET visible_at        = v_until,
                receive_count     = m.receive_count + 1,
                first_received_at = coalesce(m.first_received_at, v_now),
                lease_token       = CASE WHEN cardinality(v_seqs) = 1 THEN v_secret
                                         ELSE sha256(v_secret || int8send(m.sequence)) END,
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
            -- As the claim's above.
            DELETE FROM skipq.ready r
            WHERE r.ctid = ANY(ARRAY(
                SELECT x.ctid FROM unnest(v_seqs) AS s(sequence)
                CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                    WHERE y.queue_id = q.id AND y.sequence = s.sequence LIMIT 1) x))
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
CREATE OR REPLACE FUNCTION skipq.receipt_parse(p_handle text, OUT queue_id bigint, OUT sequence bigint, OUT token bytea) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    b bytea;
BEGIN
    -- The only shape a handle has: 64 bytes, none outside the base64url
    -- alphabet (decode() would skip whitespace). The alphabet is spelled
    -- out, not given as ranges, and looked for as one character outside it:
    -- ^[A-Za-z0-9_-]{64}$ cost about 20 us a handle (its count), and ltrim()
    -- by the alphabet 17-44 us in a UTF-8 database, where this takes about
    -- 1. receipts_parse checks the same.
    IF p_handle IS NULL OR NOT (octet_length(p_handle) = 64 AND p_handle !~ '[^ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-]') THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404',
            DETAIL = 'not a receipt handle this server issued';
    END IF;
    -- replace(), not translate(): in a UTF-8 database translate() measures
    -- every character of the handle and of both sets, about 10,000
    -- instructions a handle where the two replace() calls take a fraction.
    b := decode(replace(replace(p_handle, '-', '+'), '_', '/'), 'base64');
    queue_id := ('x' || encode(substr(b, 1, 8), 'hex'))::bit(64)::bigint;
    sequence := ('x' || encode(substr(b, 9, 8), 'hex'))::bit(64)::bigint;
    token := substr(b, 17, 32);
END $_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receipts_parse(p_handles text[]) RETURNS TABLE(handle text, queue_id bigint, sequence bigint, token bytea)
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT DISTINCT ON (k.queue_id, k.sequence, k.token) k.h, k.queue_id, k.sequence, k.token
    FROM (SELECT h.h, h.n,
                 ('x' || encode(substr(d.b, 1, 8), 'hex'))::bit(64)::bigint AS queue_id,
                 ('x' || encode(substr(d.b, 9, 8), 'hex'))::bit(64)::bigint AS sequence,
                 substr(d.b, 17, 32) AS token
          FROM unnest(p_handles) WITH ORDINALITY AS h(h, n)
          -- OFFSET 0: decoded once per handle, not once per use of b. The
          -- base64url alphabet back to base64's by replace() (receipt_parse
          -- says why not translate()).
          CROSS JOIN LATERAL (SELECT CASE WHEN octet_length(h.h) = 64
                                               AND h.h !~ '[^ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-]'
                                          THEN decode(replace(replace(h.h, '-', '+'), '_', '/'), 'base64') END AS b OFFSET 0) d
          WHERE d.b IS NOT NULL) k
    ORDER BY k.queue_id, k.sequence, k.token, k.n
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_fifo boolean;
BEGIN
    IF receive.tenant IS NULL OR receive.tenant = '' THEN
        RAISE EXCEPTION 'skipq: tenant must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.fifo INTO v_fifo FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name;
    IF NOT FOUND THEN
        PERFORM skipq.check_queue_name('queue_name', queue_name);
    END IF;
    IF max_messages IS NULL OR max_messages NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'skipq: max_messages must be between 1 and 1024' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF visibility_seconds NOT BETWEEN 1 AND 43200 THEN
        RAISE EXCEPTION 'skipq: visibility_seconds must be between 1 and 43200' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_messages_per_group IS NULL OR max_messages_per_group NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'skipq: max_messages_per_group must be between 1 and 10'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- In the claim's order: a standard queue's by sequence, a FIFO
    -- queue's groups in rotation, each group's run in order. The handle as
    -- service/receipt.go encodes it (base64url, no padding; 48 bytes give
    -- 64 characters, under encode()'s 76 per line), its alphabet by
    -- replace() (receipt_parse says why not translate()). A group only from a
    -- FIFO queue, as the standard queue's answer always had none.
    RETURN QUERY
    SELECT replace(replace(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+', '-'), '/', '_'),
           queue_name, m.message_id, m.sequence,
           CASE WHEN v_fifo THEN m.group_id END, m.client_id, m.metadata,
           CASE WHEN m.tags ? 'skipq.body' THEN skipq.topic_body(m.body, m.tags) ELSE m.body END,
           m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0, NULL, max_messages_per_group, 'claim') m;
END $$;
-- +goose StatementEnd

-- +goose Down
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
    v_per     integer := greatest(p_max_per_group, 1);
    v_room    integer;           -- messages the answer still has room for
    v_limit   integer;           -- a pass's groups at most
    v_full_passes integer := 0;  -- passes that took as many groups as the room
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
    v_secret  bytea;             -- the claim's secret: its tokens come from it
BEGIN
    -- A receive on a FIFO queue (p_mode 'claim', 'delete' for autoAck,
    -- 'peek'): up to p_max_messages messages, at most p_max_per_group from
    -- each receivable group, groups in rotation order, within the response
    -- budget (skipq.message_wire_size, the group id and p_message_overhead
    -- per message; the first always fits). Rows come back in answer order.
    -- A pass locks receivable groups' rows (SKIP LOCKED) with their heads,
    -- then each group's run of messages (SKIP LOCKED). The first pass locks
    -- as many groups as full runs need, not as many as the answer has room
    -- for messages: every row it locks stays locked to the commit, and
    -- other receivers pass it over. When runs were shorter, a second pass
    -- tries the groups behind the ones tried, as many as the room (each
    -- gives at least one message). A group whose head another transaction
    -- holds gives nothing; when that left the answer short after a pass of
    -- that size, one more pass tries the groups behind, so a held head
    -- does not empty a receive that other groups can fill (a pass that
    -- walks only when needed: locking every head in the walk cost most of
    -- the claim's throughput). A claim then leases the groups
    -- and moves them to the back of the rotation, an autoAck releases
    -- them. On a traced queue each message gets its 'received' event (and
    -- 'acked' for autoAck), under p_key_id.
    SELECT * INTO q FROM skipq.queues x WHERE x.tenant = p_tenant AND x.name = p_queue AND x.fifo;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    LOOP
        v_pass := v_pass + 1;
        v_room := p_max_messages - cardinality(v_seqs);
        -- The first pass takes as many groups as full runs need; the next
        -- ones as many as the room, as a group gives at least one message.
        v_limit := CASE WHEN v_pass = 1 THEN (v_room + v_per - 1) / v_per ELSE v_room END;
        IF v_limit = v_room THEN
            v_full_passes := v_full_passes + 1;
        END IF;
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
              LIMIT v_limit
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
            -- k = 1: the group's first message, so a group served.
            SELECT l.ord, l.row, l.sequence, l.size, l.k
            FROM (SELECT l.*, row_number() OVER (PARTITION BY l.ord ORDER BY l.sequence) AS k FROM locked l) l
            WHERE l.k = l.rn
        ), picked AS (
            -- The budget counts what earlier passes took.
            SELECT w.ord, w.row, w.sequence, w.size, w.k FROM (
                SELECT w.ord, w.row, w.sequence, w.size, w.k, row_number() OVER win + cardinality(v_seqs) AS n,
                       sum(w.size::float8) OVER win - w.size + v_bytes AS before
                FROM kept w
                WINDOW win AS (ORDER BY w.ord, w.sequence ROWS UNBOUNDED PRECEDING)) w
            WHERE w.n <= p_max_messages AND (w.n = 1 OR w.before < p_max_response_bytes)
        )
        SELECT p.*, k.*
        FROM (SELECT array_agg(p.sequence ORDER BY p.ord, p.sequence), array_agg(p.row ORDER BY p.ord, p.sequence),
                     array_agg(v_groups[p.ord]) FILTER (WHERE p.k = 1), array_agg(v_rows[p.ord]) FILTER (WHERE p.k = 1),
                     coalesce(sum(p.size), 0)
              FROM picked p) p,
             (SELECT count(*), count(*) FILTER (WHERE k.k = 1) FROM kept k) k
        INTO v_got, v_got_msgs, v_got_groups, v_got_rows, v_got_bytes, v_kept, v_served;
        v_seqs := v_seqs || coalesce(v_got, '{}');
        v_msgs := v_msgs || coalesce(v_got_msgs, '{}');
        v_taken := v_taken || coalesce(v_got_groups, '{}');
        v_taken_rows := v_taken_rows || coalesce(v_got_rows, '{}');
        v_bytes := v_bytes + v_got_bytes;
        v_tried := v_tried || v_groups;
        -- Another pass while the answer has room in count and budget: after
        -- a first pass whose groups gave short runs (it found as many
        -- groups as it looked for), or for groups that gave nothing (a
        -- head held elsewhere), at most once after a pass that took as
        -- many groups as the room.
        EXIT WHEN cardinality(v_seqs) >= p_max_messages OR coalesce(cardinality(v_got), 0) < v_kept
               OR v_served = cardinality(v_groups) AND (v_limit = v_room OR cardinality(v_groups) < v_limit)
               OR v_full_passes = 2;
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

    -- The lease starts now, after the statements above chose the messages:
    -- v_now was read at the call's start, and a message readied in between
    -- (its delay just ended) would get a lease dated before it was
    -- available.
    v_until := coalesce(p_now, clock_timestamp()) + make_interval(secs => coalesce(p_visibility_seconds, q.visibility_seconds));
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
        -- One secret of 244 random bits a claim, stored nowhere but as the
        -- token of a claim of one message; each message's token is
        -- SHA-256 of it and the message's sequence, as message_claim's
        -- (DESIGN.md, "Receipt handles").
        v_secret := uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid());
        RETURN QUERY
        WITH unready AS (
            -- Each ready row by a probe of its key that a plan cannot
            -- flatten into a join (LIMIT 1), deleted at the address found:
            -- `queue_id = q.id AND sequence = ANY(v_seqs)`, planned on a
            -- drained table's statistics, kept the sequences as a filter
            -- over a walk of all of the queue's ready rows. Every statement
            -- that changes a FIFO message's ready row locks the message
            -- first, as this claim did, so the row stays where the probe
            -- found it.
            DELETE FROM skipq.ready r
            WHERE r.ctid = ANY(ARRAY(
                SELECT x.ctid FROM unnest(v_seqs) AS s(sequence)
                CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                    WHERE y.queue_id = q.id AND y.sequence = s.sequence LIMIT 1) x))
        ), timed AS (
            -- One timer for the claim's messages, due when their lease
            -- ends: the worker fires each of them that is still due then.
            INSERT INTO skipq.timer_sets (due_at, queue_id, sequences) VALUES (v_until, q.id, v_seqs)
        ), claimed AS (
            UPDATE skipq.messages m
            SET visible_at        = v_until,
                receive_count     = m.receive_count + 1,
                first_received_at = coalesce(m.first_received_at, v_now),
                lease_token       = CASE WHEN cardinality(v_seqs) = 1 THEN v_secret
                                         ELSE sha256(v_secret || int8send(m.sequence)) END,
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
            -- As the claim's above.
            DELETE FROM skipq.ready r
            WHERE r.ctid = ANY(ARRAY(
                SELECT x.ctid FROM unnest(v_seqs) AS s(sequence)
                CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                                    WHERE y.queue_id = q.id AND y.sequence = s.sequence LIMIT 1) x))
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
CREATE OR REPLACE FUNCTION skipq.receipt_parse(p_handle text, OUT queue_id bigint, OUT sequence bigint, OUT token bytea) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    b bytea;
BEGIN
    -- The only shape a handle has: 64 bytes, none outside the base64url
    -- alphabet (decode() would skip whitespace). The alphabet is spelled
    -- out, not given as ranges, and looked for as one character outside it:
    -- ^[A-Za-z0-9_-]{64}$ cost about 20 us a handle (its count), and ltrim()
    -- by the alphabet 17-44 us in a UTF-8 database, where this takes about
    -- 1. receipts_parse checks the same.
    IF p_handle IS NULL OR NOT (octet_length(p_handle) = 64 AND p_handle !~ '[^ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-]') THEN
        RAISE EXCEPTION 'skipq: receipt_stale' USING ERRCODE = 'SQ404',
            DETAIL = 'not a receipt handle this server issued';
    END IF;
    b := decode(translate(p_handle, '-_', '+/'), 'base64');
    queue_id := ('x' || encode(substr(b, 1, 8), 'hex'))::bit(64)::bigint;
    sequence := ('x' || encode(substr(b, 9, 8), 'hex'))::bit(64)::bigint;
    token := substr(b, 17, 32);
END $_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receipts_parse(p_handles text[]) RETURNS TABLE(handle text, queue_id bigint, sequence bigint, token bytea)
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT DISTINCT ON (k.queue_id, k.sequence, k.token) k.h, k.queue_id, k.sequence, k.token
    FROM (SELECT h.h, h.n,
                 ('x' || encode(substr(d.b, 1, 8), 'hex'))::bit(64)::bigint AS queue_id,
                 ('x' || encode(substr(d.b, 9, 8), 'hex'))::bit(64)::bigint AS sequence,
                 substr(d.b, 17, 32) AS token
          FROM unnest(p_handles) WITH ORDINALITY AS h(h, n)
          -- OFFSET 0: decoded once per handle, not once per use of b.
          CROSS JOIN LATERAL (SELECT CASE WHEN octet_length(h.h) = 64
                                               AND h.h !~ '[^ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-]'
                                          THEN decode(translate(h.h, '-_', '+/'), 'base64') END AS b OFFSET 0) d
          WHERE d.b IS NOT NULL) k
    ORDER BY k.queue_id, k.sequence, k.token, k.n
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.receive(queue_name text, max_messages integer DEFAULT 1, visibility_seconds integer DEFAULT NULL::integer, max_messages_per_group integer DEFAULT 1, tenant text DEFAULT 'default'::text) RETURNS TABLE(receipt_handle text, queue text, message_id text, sequence bigint, group_id text, client_id text, metadata text, body bytea, body_is_binary boolean, tags jsonb, sent_at timestamp with time zone, first_received_at timestamp with time zone, receive_count integer, visible_until timestamp with time zone, delayed_to timestamp with time zone, expires_at timestamp with time zone, re_routed_from text, dead_lettered_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_fifo boolean;
BEGIN
    IF receive.tenant IS NULL OR receive.tenant = '' THEN
        RAISE EXCEPTION 'skipq: tenant must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.fifo INTO v_fifo FROM skipq.queues q WHERE q.tenant = receive.tenant AND q.name = queue_name;
    IF NOT FOUND THEN
        PERFORM skipq.check_queue_name('queue_name', queue_name);
    END IF;
    IF max_messages IS NULL OR max_messages NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'skipq: max_messages must be between 1 and 1024' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF visibility_seconds NOT BETWEEN 1 AND 43200 THEN
        RAISE EXCEPTION 'skipq: visibility_seconds must be between 1 and 43200' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_messages_per_group IS NULL OR max_messages_per_group NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'skipq: max_messages_per_group must be between 1 and 10'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- In the claim's order: a standard queue's by sequence, a FIFO
    -- queue's groups in rotation, each group's run in order. The handle as
    -- service/receipt.go encodes it (base64url, no padding; 48 bytes give
    -- 64 characters, under encode()'s 76 per line). A group only from a
    -- FIFO queue, as the standard queue's answer always had none.
    RETURN QUERY
    SELECT translate(encode(int8send(m.queue_id) || int8send(m.sequence) || m.lease_token, 'base64'), '+/', '-_'),
           queue_name, m.message_id, m.sequence,
           CASE WHEN v_fifo THEN m.group_id END, m.client_id, m.metadata,
           CASE WHEN m.tags ? 'skipq.body' THEN skipq.topic_body(m.body, m.tags) ELSE m.body END,
           m.body_binary, m.tags, m.sent_at,
           m.first_received_at, m.receive_count, m.visible_at, m.delayed_to, m.expires_at,
           m.re_routed_from, m.dead_lettered_at
    FROM skipq.message_claim(receive.tenant, queue_name, NULL, visibility_seconds, max_messages,
                             9223372036854775807, 0, NULL, max_messages_per_group, 'claim') m;
END $$;
-- +goose StatementEnd
