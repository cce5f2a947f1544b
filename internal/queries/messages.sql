-- Messages: send, claim, settle and move. Every statement here touches one
-- queue's rows through the primary key (queue_id, sequence) or the
-- (queue_id, message_id) unique index, and is bounded by its inputs.
--
-- skipq's connections forbid sequential and bitmap scans, sorts, hash and
-- merge joins (internal/db/pool.go), because queue tables are often
-- analyzed while nearly empty and any of those then looks free. Even so,
-- on such statistics (one live row over hundreds of pages) every index
-- scan looks as cheap as a probe, so each statement here is written so
-- that only a probe can serve it (docs/DESIGN.md, "Settling by address"):
-- a message is found by the primary key's bounded range in sequence order
-- (skipq.message_rows) or its id's range in id order (or, looked up by id
-- alone, with the queue compared as `queue_id + 0`, which no index serves:
-- the message id index is then the only one a plan can use, where the
-- primary key's walk of the queue cost the same), a ready row or a key
-- by a subquery with LIMIT 1 (which a plan cannot turn into a join that
-- walks the table), and rows chosen under a LIMIT are changed as an array
-- of their addresses, chosen once (as `IN (…)`, a semi join chose them
-- again for every row of a walk of the table).

-- Sends go through skipq.message_insert
-- (internal/migrations/current/functions/message_insert.sql, called by
-- internal/db/message_insert.go), the one implementation shared with the SQL API.
-- The claim (MessageClaim, skipq.message_claim) is written by hand in
-- internal/db/message_claim.go, which reads its rows without pgx's
-- per-field copies.
--
-- Statements that change a message record an event for each changed row
-- that carries a trace id ("skipq.trace" in its tags, docs/API.md#history) in
-- skipq.message_events, in the same statement; the functions do it for
-- their own changes. @key_id(s): the API key of the request, NULL for the
-- worker's.

-- name: MessageAckByReceipt :many
-- Deletes the messages whose lease the handles hold (skipq.message_ack; on
-- a queue with retainAckedSeconds, retains them: skipq.message_retain),
-- returning the token each matched, so the caller credits exactly the
-- handle that settled the row, and whether the message was in a group
-- (its group may have become receivable: waiting receivers are woken).
SELECT a.queue_id, a.sequence, a.lease_token::bytea AS token, (a.group_id IS NOT NULL)::boolean AS grouped
FROM skipq.message_ack(@queue_ids::bigint[], @sequences::bigint[], @tokens::bytea[],
    array_replace(@key_ids::bigint[], 0, NULL), sqlc.narg('now')::timestamptz) a;

-- name: MessageSetVisibilityByReceipt :many
-- Each lease now ends its @visibility_seconds (>= 1, one per handle)
-- from now; the handles stay valid (skipq.message_set_visibility).
SELECT e.queue_id, e.sequence, e.lease_token::bytea AS token, e.visible_at
FROM skipq.message_set_visibility(sqlc.narg('now')::timestamptz, @queue_ids::bigint[], @sequences::bigint[],
    @tokens::bytea[], @visibility_seconds::integer[],
    array_replace(@key_ids::bigint[], 0, NULL)) e;

-- Nacks (and the dead-letter move of last deliveries) are
-- skipq.message_nack and skipq.message_dead_letter
-- (internal/migrations/current/functions/message_nack.sql,
-- message_dead_letter.sql), called by internal/db/settle_moves.go: the SQL
-- consumer API's skipq.nack calls them too.

-- Requeues are skipq.message_requeue
-- (internal/migrations/current/functions/message_requeue.sql), called by
-- internal/db/settle_moves.go; the SQL consumer API's skipq.requeue calls it
-- too.

-- name: MessageDeleteByQueue :one
-- Purge and queue deletion: every message of the queue, in every state, and
-- their ready rows. Returns how many messages. Run after
-- TopicPendingDeleteByQueue, in a statement of its own (see there).
WITH gone AS (
    DELETE FROM skipq.messages m WHERE m.queue_id = @queue_id
    RETURNING m.queue_id, m.sequence, m.ready, m.message_id, m.tags
), traced AS (
    INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, gone_at)
    SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, 'deleted', coalesce(sqlc.narg('now')::timestamptz, now()),
           sqlc.narg('key_id')::bigint, coalesce(sqlc.narg('now')::timestamptz, now())
    FROM gone g WHERE g.tags ? 'skipq.trace'
), unready AS (
    DELETE FROM skipq.ready r
    WHERE r.ctid = ANY(ARRAY(
        SELECT x.ctid FROM gone g
        CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                            WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence LIMIT 1) x WHERE g.ready))
)
SELECT count(*)::bigint AS deleted FROM gone;

-- name: MessageDeleteOrphaned :many
-- Worker: removes up to @max_messages messages whose queue no longer exists.
-- Messages have no foreign key to their queue (see the table's comment), so a
-- send (or a move) whose statement read the queue row just before a
-- concurrent QueueDelete committed can insert after that delete's own
-- DELETE ran. Such a message is already unreachable -- receives resolve the
-- queue by name, settles check that the queue exists -- and this sweep frees
-- it. The queue ids still present in the table are found with a loose index
-- scan of the primary key (one descent per distinct queue, not a pass over
-- every message); queue ids are never reused, so an orphan stays one.
WITH RECURSIVE present(queue_id) AS (
    (SELECT m.queue_id FROM skipq.messages m ORDER BY m.queue_id LIMIT 1)
    UNION ALL
    SELECT (SELECT m.queue_id FROM skipq.messages m
            WHERE m.queue_id > present.queue_id ORDER BY m.queue_id LIMIT 1)
    FROM present WHERE present.queue_id IS NOT NULL
), gone AS (
    DELETE FROM skipq.messages m
    WHERE m.ctid = ANY(ARRAY(
        SELECT c.ctid FROM skipq.messages c
        WHERE c.queue_id IN (
            SELECT p.queue_id FROM present p
            WHERE p.queue_id IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = p.queue_id))
        LIMIT @max_messages
        FOR UPDATE SKIP LOCKED))
    RETURNING m.queue_id, m.sequence, m.ready
), unready AS (
    DELETE FROM skipq.ready r
    WHERE r.ctid = ANY(ARRAY(
        SELECT x.ctid FROM gone g
        CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                            WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence LIMIT 1) x WHERE g.ready))
)
SELECT gone.queue_id FROM gone;

-- name: TimerWait :one
-- Worker: seconds until the earliest timer is due (0: now), at most
-- @cap_seconds; skipq.timer_wait
-- (internal/migrations/current/functions/timer_wait.sql).
SELECT skipq.timer_wait(sqlc.narg('now')::timestamptz, @cap_seconds::float8)::float8 AS wait_seconds;

-- name: TimerTakeDue :many
-- Worker: takes up to @max_timers due timers, oldest first, and due timer
-- sets (skipq.timer_sets: one row for a claim's messages), oldest first,
-- until they hold @max_timers messages; one row a message. A set is taken
-- whole and at least one is, so the sets bring fewer than @max_timers
-- messages plus one set's (a claim's: up to the largest maxMessages of a
-- receive), not @max_timers sets of a claim's size each. SKIP LOCKED, so
-- workers on several nodes take disjoint batches. The caller then locks
-- the messages (MessageFire) in the same transaction: timers are locked
-- before messages, and as no statement holds a message and then waits for
-- a timer (timers are only ever inserted otherwise), this order cannot
-- deadlock.
WITH single AS (
    DELETE FROM skipq.timers t
    WHERE t.ctid = ANY(ARRAY(
        SELECT c.ctid FROM skipq.timers c
        WHERE c.due_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        ORDER BY c.due_at
        LIMIT @max_timers
        FOR UPDATE SKIP LOCKED))
    RETURNING t.queue_id, t.sequence
), sets AS (
    -- Each set locked as the walk reaches it, then one row a message of
    -- it: the LIMIT stops the walk at the set that holds the
    -- @max_timers-th message, so no set past it is locked. The address
    -- repeats once a message; ctid = ANY takes each address once.
    DELETE FROM skipq.timer_sets t
    WHERE t.ctid = ANY(ARRAY(
        SELECT c.ctid
        FROM (SELECT c.ctid, c.sequences FROM skipq.timer_sets c
              WHERE c.due_at <= coalesce(sqlc.narg('now')::timestamptz, now())
              ORDER BY c.due_at
              FOR UPDATE SKIP LOCKED) c
        CROSS JOIN LATERAL unnest(c.sequences)
        LIMIT @max_timers))
    RETURNING t.queue_id, t.sequences
)
SELECT s.queue_id, s.sequence FROM single s
UNION ALL
SELECT t.queue_id, x.sequence FROM sets t CROSS JOIN LATERAL unnest(t.sequences) AS x(sequence);

-- name: MessageFire :many
-- Worker: fires the timers TimerTakeDue took, in the same transaction:
-- locks their messages that are still due (SKIP LOCKED), readies those with
-- deliveries left and files again the timers of those another transaction
-- held; `exhausted` marks a last allowed delivery whose lease ran out, for
-- MessageDeadLetter. skipq.message_fire
-- (internal/migrations/current/functions/message_fire.sql).
SELECT f.queue_id::bigint AS queue_id, f.sequence::bigint AS sequence, f.exhausted::boolean AS exhausted
FROM skipq.message_fire(@queue_ids::bigint[], @sequences::bigint[], sqlc.narg('now')::timestamptz,
                        @retry_seconds::integer) AS f(queue_id, sequence, exhausted);

-- name: MessageDeleteExpired :many
-- Worker: removes up to @max_messages expired messages that are not in a live
-- lease (an in-flight message can still be settled), and the retained
-- messages whose retention ended (their expires_at; the empty lease token
-- marks them, skipq.message_retain).
-- Returns the queues, and which were retained, for the expired-messages
-- metric: a retained message's end is no expiry.
WITH gone AS (
    DELETE FROM skipq.messages m
    WHERE m.ctid = ANY(ARRAY(
        SELECT c.ctid FROM skipq.messages c
        WHERE c.expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
          AND NOT (c.lease_token IS NOT NULL AND c.visible_at > coalesce(sqlc.narg('now')::timestamptz, now()))
        ORDER BY c.expires_at
        LIMIT @max_messages
        FOR UPDATE SKIP LOCKED))
    RETURNING m.queue_id, m.sequence, m.ready, m.lease_token, m.message_id, m.tags
), traced AS (
    -- An expired message's last event; a retained one's acked event gets
    -- the end of its retention as the time it was gone.
    INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, gone_at)
    SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, 'expired',
           coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now())
    FROM gone g WHERE g.tags ? 'skipq.trace' AND g.lease_token IS DISTINCT FROM '\x'::bytea
), retained AS (
    UPDATE skipq.message_events e SET gone_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM gone g
    WHERE g.tags ? 'skipq.trace' AND g.lease_token = '\x'::bytea
      AND e.trace_id = (g.tags->>'skipq.trace')::bigint AND e.queue_id = g.queue_id AND e.message_id = g.message_id
      AND e.type = 'acked'
), unready AS (
    DELETE FROM skipq.ready r
    WHERE r.ctid = ANY(ARRAY(
        SELECT x.ctid FROM gone g
        CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                            WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence LIMIT 1) x WHERE g.ready))
)
SELECT gone.queue_id, coalesce(gone.lease_token = '\x'::bytea, false)::boolean AS retained FROM gone;

-- name: MessageBrowse :many
-- States are judged at clock_timestamp(), read after this statement's
-- snapshot, not at now(): now() is when the transaction began, before the
-- snapshot (and, with the plan settings piped ahead, a statement earlier),
-- so a message sent and committed in between was shown as "delayed" (its
-- visible_at after that now()). Here, in MessageGetByID and in QueueStats.
-- Operator browse: a queue's messages by sequence after the cursor, with
-- their state, optionally only one state (@state '' = all). Keyset
-- pagination on the primary key: no offset scans. Expired messages not yet
-- removed are not shown. The page stops at the response budget like a
-- receive (MessageClaim): the walk measures sizes without fetching bodies,
-- and only the rows kept are read whole, each found by the primary key's
-- bounded probe (skipq.message_rows) and read at its address: planned on
-- drained statistics, a read by `sequence = ANY(…)` was a walk of the
-- whole queue. Rows come back in no particular order (an ORDER BY here
-- could make the planner walk the whole queue to avoid a sort); the caller
-- sorts them.
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS now),
kept AS (
    SELECT ARRAY(
      SELECT b.sequence FROM (
          SELECT c.sequence, row_number() OVER w AS n, sum(c.size) OVER w - c.size AS before
          FROM (
              SELECT c.sequence,
                     skipq.message_wire_size(c.body, c.body_binary, c.metadata, c.tags, c.message_id,
                         c.client_id, c.re_routed_from)
                     + @message_overhead::bigint AS size
              FROM skipq.messages c, t
              CROSS JOIN LATERAL (SELECT skipq.message_state(
                  c.visible_at, c.receive_count, c.max_receive_count, c.lease_token, t.now) AS state) s
              WHERE c.queue_id = @queue_id
                AND c.sequence > @after_sequence::bigint
                AND (c.expires_at IS NULL OR c.expires_at > t.now)
                AND (@state::text = '' OR s.state = @state::text)
              ORDER BY c.sequence
              LIMIT @max_messages) c
          WINDOW w AS (ORDER BY c.sequence ROWS UNBOUNDED PRECEDING)) b
      WHERE b.n = 1 OR b.before < @max_response_bytes::bigint)::bigint[] AS sequences
)
SELECT sqlc.embed(m),
       skipq.message_state(m.visible_at, m.receive_count, m.max_receive_count, m.lease_token, t.now)::text AS state
FROM skipq.messages m, t
WHERE m.ctid = ANY(ARRAY(SELECT r.address
                         FROM kept, skipq.message_rows(array_fill(@queue_id::bigint, ARRAY[cardinality(kept.sequences)]),
                                                       kept.sequences) AS r(address, n)));

-- name: MessageGetByID :one
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS now)
SELECT sqlc.embed(m),
       skipq.message_state(m.visible_at, m.receive_count, m.max_receive_count, m.lease_token, t.now)::text AS state
FROM skipq.messages m, t
WHERE m.message_id = @message_id AND m.queue_id + 0 = @queue_id
  AND (m.expires_at IS NULL OR m.expires_at > t.now);

-- name: MessageDeleteByID :one
-- Operator delete of one message (and its ready row); its receipt handles go
-- stale with it. Returns how many messages (0 or 1), and the message's
-- group ('' for none), whose lease may end with it (GroupRelease).
WITH gone AS (
    DELETE FROM skipq.messages m
    WHERE m.message_id = @message_id AND m.queue_id + 0 = @queue_id
    RETURNING m.queue_id, m.sequence, m.ready, m.group_id, m.message_id, m.tags
), traced AS (
    INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, gone_at)
    SELECT (g.tags->>'skipq.trace')::bigint, g.queue_id, g.message_id, 'deleted', coalesce(sqlc.narg('now')::timestamptz, now()),
           sqlc.narg('key_id')::bigint, coalesce(sqlc.narg('now')::timestamptz, now())
    FROM gone g WHERE g.tags ? 'skipq.trace'
), unready AS (
    DELETE FROM skipq.ready r
    WHERE r.ctid = ANY(ARRAY(
        SELECT x.ctid FROM gone g
        CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                            WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence LIMIT 1) x WHERE g.ready))
)
SELECT count(*)::bigint AS deleted, coalesce(min(gone.group_id), '')::text AS group_id FROM gone;

-- name: GroupRelease :exec
-- The groups of messages that left flight or the queue outside a settle
-- (an operator delete): their leases end if nothing else of them is in
-- flight, and empty ones go (skipq.group_release).
SELECT count(*) FROM skipq.group_release(@queue_ids::bigint[], @group_ids::text[]);

-- name: MessageDeadLetteredList :many
-- GET /v1/dlq: a tenant's dead-lettered messages, newest deadLetteredAt
-- first, after the cursor (dead_lettered_at, sequence), optionally only
-- those that came from @source_queue, or died of @cause (docs/API.md#model). Walks messages_dead_lettered_idx,
-- measuring sizes without fetching bodies, and stops at the response budget
-- like a receive (MessageClaim); then reads the rows kept, each found by
-- the primary key's bounded probe (skipq.message_rows) and read at its
-- address: planned on drained statistics, a join of the page to the
-- messages by key walked the whole primary key for every row of the page
-- (130,702 buffers for a page of 100 behind 30,000 messages). The queue's
-- name is a subquery: joined, it let the planner reach the messages
-- through the queue instead of the key.
-- Rows come back in no particular order (an ORDER BY here could make the
-- planner drive the join from the index to avoid a sort); the caller sorts
-- them.
WITH page AS MATERIALIZED (
    SELECT b.queue_id, b.sequence FROM (
        SELECT c.queue_id, c.sequence, row_number() OVER w AS n, sum(c.size) OVER w - c.size AS before
        FROM (
            SELECT m.queue_id, m.sequence, m.dead_lettered_at,
                   skipq.message_wire_size(m.body, m.body_binary, m.metadata, m.tags, m.message_id,
                       m.client_id, m.re_routed_from)
                   + @message_overhead::bigint AS size
            FROM skipq.messages m
            JOIN skipq.queues q ON q.id = m.queue_id
            WHERE m.dead_lettered_at IS NOT NULL
              AND q.tenant = @tenant
              AND (@source_queue::text = '' OR m.re_routed_from = @source_queue::text)
              AND (@cause::text = '' OR (m.tags->>'skipq.deadLetter')::jsonb->>'cause' = @cause::text)
              AND (sqlc.narg('after_dead_lettered_at')::timestamptz IS NULL
                   OR (m.dead_lettered_at, m.sequence) < (sqlc.narg('after_dead_lettered_at')::timestamptz, @after_sequence::bigint))
            ORDER BY m.dead_lettered_at DESC, m.sequence DESC
            LIMIT @max_messages) c
        WINDOW w AS (ORDER BY c.dead_lettered_at DESC, c.sequence DESC ROWS UNBOUNDED PRECEDING)) b
    WHERE b.n = 1 OR b.before < @max_response_bytes::bigint
), kept AS (
    SELECT array_agg(page.queue_id) AS queue_ids, array_agg(page.sequence) AS sequences FROM page
)
SELECT sqlc.embed(m), (SELECT q.name FROM skipq.queues q WHERE q.id = m.queue_id)::text AS queue_name
FROM skipq.messages m
WHERE m.ctid = ANY(ARRAY(SELECT r.address
                         FROM kept, skipq.message_rows(kept.queue_ids, kept.sequences) AS r(address, n)));

-- name: MessageDeadLetteredPick :many
-- Redrive: up to @max_messages dead-lettered messages of a queue (or the one
-- named @message_id), locked for MessageRedrive in the same transaction.
-- Bulk redrives SKIP LOCKED so two nodes take disjoint batches; a single
-- redrive waits instead, so a racing second redrive of the same message
-- finds it gone.
SELECT m.sequence, m.message_id, m.re_routed_from, m.dead_lettered_at
FROM skipq.messages m
WHERE m.queue_id = @queue_id
  AND m.dead_lettered_at IS NOT NULL
ORDER BY m.sequence
LIMIT @max_messages
FOR UPDATE SKIP LOCKED;

-- name: MessageLockByID :one
-- Single redrive: the message, locked (waiting for a racing redrive).
SELECT m.sequence, m.message_id, m.re_routed_from, m.dead_lettered_at
FROM skipq.messages m
WHERE m.message_id = @message_id AND m.queue_id + 0 = @queue_id
FOR UPDATE;

-- name: MessageDeadLetteredCount :one
SELECT count(*) FROM skipq.messages
WHERE queue_id = @queue_id AND dead_lettered_at IS NOT NULL;

-- name: MessageRedrive :many
-- Moves dead-lettered messages (locked by the caller) out of their queue as
-- new messages, in one statement: a new server messageId, receiveCount 0,
-- the destination's defaults, reRoutedFrom = the queue they left,
-- deadLetteredAt cleared, no record of past failures (docs/API.md#model). The
-- destination is @to_queue, or each message's
-- reRoutedFrom when @to_queue is ''; destinations must exist (same tenant).
-- A message whose destination does not exist is left in place.
-- Each message is found by a probe only the primary key serves
-- (skipq.message_rows) and deleted at its address, whatever the statistics
-- (docs/DESIGN.md, "Settling by address"): planned on a drained table's,
-- `queue_id = @queue_id AND sequence = ANY(…)` was a filter over every
-- message of the queue, for every batch. No other condition on the target
-- may be one an index serves: `dead_lettered_at IS NOT NULL` (hence the
-- num_nulls) matches messages_dead_lettered_idx's predicate, and a plan on
-- drained statistics walked that index over every dead letter of every
-- queue. The caller holds the rows locked since it picked them, so none
-- can have moved to another address meanwhile.
WITH src AS (
    SELECT q.id, q.tenant, q.name FROM skipq.queues q WHERE q.id = @queue_id
), moved AS (
    DELETE FROM skipq.messages m
    WHERE m.ctid = ANY(ARRAY(SELECT r.address
                             FROM skipq.message_rows(array_fill(@queue_id::bigint, ARRAY[coalesce(cardinality(@sequences::bigint[]), 0)]),
                                                     @sequences::bigint[]) AS r(address, n)))
      AND num_nulls(m.dead_lettered_at) = 0
      AND EXISTS (SELECT 1 FROM skipq.queues d, src
                  WHERE d.tenant = src.tenant
                    AND d.name = CASE WHEN @to_queue::text = '' THEN m.re_routed_from ELSE @to_queue::text END)
    RETURNING m.queue_id, m.sequence, m.ready, m.client_id, m.metadata, m.body, m.body_binary, m.tags, m.group_id, m.message_id, m.re_routed_from
), unready AS (
    DELETE FROM skipq.ready r
    WHERE r.ctid = ANY(ARRAY(
        SELECT x.ctid FROM moved g
        CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                            WHERE y.queue_id = g.queue_id AND y.sequence = g.sequence LIMIT 1) x WHERE g.ready))
), t AS (
    SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS now
), inserted AS (
    INSERT INTO skipq.messages (
        queue_id, message_id, client_id, metadata, body, body_binary, tags,
        sent_at, visible_at, delayed_to, expires_at, max_receive_count, dead_letter_queue, re_routed_from, ready,
        group_id)
    SELECT dq.id, skipq.uuid_v7()::text,
           moved.client_id, moved.metadata, moved.body, moved.body_binary,
           moved.tags - 'skipq.failure' - 'skipq.deadLetter',
           t.now,
           t.now + make_interval(secs => dq.delay_seconds),
           CASE WHEN dq.delay_seconds > 0 THEN t.now + make_interval(secs => dq.delay_seconds) END,
           CASE WHEN dq.expiration_seconds > 0
                THEN t.now + make_interval(secs => dq.delay_seconds + dq.expiration_seconds) END,
           CASE WHEN dq.max_receive_count > 0 THEN dq.max_receive_count ELSE @server_max_receive_count::integer END,
           dq.dead_letter_queue,
           src.name,
           dq.delay_seconds = 0,
           CASE WHEN dq.fifo THEN coalesce(moved.group_id, moved.message_id) END
    FROM moved, src, t, skipq.queues dq
    WHERE dq.tenant = src.tenant
      AND dq.name = CASE WHEN @to_queue::text = '' THEN moved.re_routed_from ELSE @to_queue::text END
    RETURNING queue_id, message_id, sequence, delayed_to, visible_at, ready, tags
), readied AS (
    INSERT INTO skipq.ready (queue_id, sequence)
    SELECT n.queue_id, n.sequence FROM inserted n WHERE n.ready
), timed AS (
    INSERT INTO skipq.timers (due_at, queue_id, sequence)
    SELECT n.visible_at, n.queue_id, n.sequence FROM inserted n WHERE NOT n.ready
), traced AS (
    -- Recorded in the queue it leaves, with its new id; the new message
    -- has the same trace id (one per message: matched by it).
    INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, key_id, detail)
    SELECT (moved.tags->>'skipq.trace')::bigint, moved.queue_id, moved.message_id, 'redriven', t.now,
           sqlc.narg('key_id')::bigint,
           jsonb_build_object('toQueue', (SELECT dq3.name FROM skipq.queues dq3 WHERE dq3.id = n.queue_id),
                              'newMessageId', n.message_id)
    FROM moved JOIN inserted n ON n.tags->>'skipq.trace' = moved.tags->>'skipq.trace', t
    WHERE moved.tags ? 'skipq.trace'
)
SELECT inserted.queue_id, inserted.message_id, inserted.sequence,
       (SELECT dq2.name FROM skipq.queues dq2 WHERE dq2.id = inserted.queue_id)::text AS queue_name,
       inserted.delayed_to
FROM inserted;

-- name: GroupEnterForRedrive :exec
-- Redrive into FIFO queues: the groups the messages will join (their own,
-- or one named by their messageId when they had none) are entered before
-- MessageRedrive draws their sequences (skipq.group_enter), in the same
-- transaction. Each message by the primary key's range probe, as in
-- MessageRedrive.
SELECT skipq.group_enter(array_agg(d.id), array_agg(coalesce(m.group_id, m.message_id)))
FROM unnest(@sequences::bigint[]) AS k(sequence)
CROSS JOIN LATERAL (SELECT x.queue_id, x.group_id, x.message_id, x.re_routed_from FROM skipq.messages x
                    WHERE x.queue_id = @queue_id
                      AND x.sequence >= k.sequence AND x.sequence <= k.sequence
                    ORDER BY x.sequence LIMIT 1) m
JOIN skipq.queues s ON s.id = m.queue_id
JOIN skipq.queues d ON d.tenant = s.tenant
     AND d.name = CASE WHEN @to_queue::text = '' THEN m.re_routed_from ELSE @to_queue::text END
WHERE d.fifo;

-- The worker's prune of empty groups is skipq.group_prune
-- (internal/migrations/current/functions/group_prune.sql), called by
-- internal/db/group_prune.go.

-- name: MessageDeadTuples :one
-- Worker: dead and live row versions in the messages table, per the
-- statistics collector (a few hundred milliseconds behind).
SELECT pg_stat_get_dead_tuples('skipq.messages'::regclass)::bigint AS dead,
       pg_stat_get_live_tuples('skipq.messages'::regclass)::bigint AS live;

-- name: ReadyDeadTuples :one
-- Worker: dead and live rows in the ready table, per the statistics
-- collector.
SELECT pg_stat_get_dead_tuples('skipq.ready'::regclass)::bigint AS dead,
       pg_stat_get_live_tuples('skipq.ready'::regclass)::bigint AS live;

-- name: ReadyVacuum :exec
-- Worker: VACUUM of the ready table alone, which removes the index entries
-- of the ready rows that claims deleted. Until then every claim walks past
-- them at the head of ready_pkey: a claim can mark an entry dead for the
-- next ones only while no transaction older than its deletion runs and no
-- insert changed the leaf page since the claim read it, and on a queue that
-- claims keep near empty the head page is the one sends insert into.
-- SKIP_LOCKED: never wait behind a running (auto)vacuum.
VACUUM (SKIP_LOCKED) skipq.ready;

-- name: MessageVacuum :exec
-- Worker: VACUUM sooner than autovacuum's one-minute nap. Every message
-- leaves dead versions, and every claim a dead ready row; until VACUUM
-- removes their index entries a claim steps over them at the head of
-- ready_pkey. SKIP_LOCKED: never wait behind a running (auto)vacuum.
-- ANALYZE too: queue tables swing between empty and full faster than
-- autovacuum's one-minute nap, and statistics taken while a table was
-- nearly empty let the planner rate a full scan of an index as cheap as a
-- primary-key probe (measured: a claim probing each message through the
-- messageId index, 600 ms under load). ANALYZE also invalidates the plans
-- cached from the old statistics.
VACUUM (ANALYZE, SKIP_LOCKED) skipq.messages, skipq.ready, skipq.timers, skipq.timer_sets, skipq.message_groups;

-- name: MessageSearchByID :many
-- Search with a messageId: the message id index gives the (at most one per
-- queue) candidates directly; the other filters and the cursor hold as in
-- MessageSearchWalk (names compare bytewise, as the node orders them).
-- The candidate of each queue is probed by a range of the id in id order,
-- which only messages_message_id_queue_key serves (sorts are off): planned
-- on drained statistics, the message was looked for through
-- messages_queue_sent_idx, whose sent_at bounds the filters give.
WITH t AS (SELECT coalesce(sqlc.narg('now')::timestamptz, clock_timestamp()) AS now)
SELECT q.id AS queue_id, q.name AS queue_name, m.sequence, m.sent_at, true AS matched, s.state::text AS state,
       (skipq.message_wire_size(m.body, m.body_binary, m.metadata, m.tags, m.message_id,
           m.client_id, m.re_routed_from) + octet_length(q.name))::bigint AS size,
       false AS exhausted
FROM t, skipq.queues q
CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence, m.message_id, m.client_id, m.metadata, m.body, m.body_binary,
                           m.tags, m.sent_at, m.visible_at, m.expires_at, m.receive_count, m.max_receive_count,
                           m.re_routed_from, m.dead_lettered_at, m.lease_token, m.group_id
                    FROM skipq.messages m
                    WHERE m.message_id >= @message_id AND m.message_id <= @message_id AND m.queue_id = q.id
                    ORDER BY m.message_id LIMIT 1) m
CROSS JOIN LATERAL (SELECT skipq.message_state(m.visible_at, m.receive_count,
    m.max_receive_count, m.lease_token, t.now) AS state) s
WHERE q.id = ANY(@queue_ids::bigint[])
  AND (sqlc.narg('group_id')::text IS NULL OR m.group_id = sqlc.narg('group_id')::text)
  AND skipq.message_search_match(@states::text[], s.state, m.dead_lettered_at, m.receive_count)
  AND m.tags @> @tags::jsonb
  AND (m.expires_at IS NULL OR m.expires_at > t.now)
  AND m.sent_at >= coalesce(sqlc.narg('sent_after')::timestamptz, '-infinity')
  AND m.sent_at < coalesce(sqlc.narg('sent_before')::timestamptz, 'infinity')
  AND (sqlc.narg('after_sent_at')::timestamptz IS NULL
       OR m.sent_at < sqlc.narg('after_sent_at')::timestamptz
       OR (m.sent_at = sqlc.narg('after_sent_at')::timestamptz
           AND (q.name COLLATE "C", m.sequence) > (@after_queue::text, @after_sequence::bigint)));

-- name: MessageGetByKeys :many
-- The rows of a search page, by primary key: one probe per (queue,
-- sequence) pair (skipq.message_rows), then the row at its address.
-- (queue_id = ANY(…) AND sequence = ANY(…) probed every queue for every
-- sequence: 10,000 probes for a page of 100 over 100 queues; a join of the
-- pairs to the table by key was, planned on drained statistics, a walk of
-- the whole primary key.)
SELECT m.* FROM skipq.messages m
WHERE m.ctid = ANY(ARRAY(SELECT r.address FROM skipq.message_rows(@queue_ids::bigint[], @sequences::bigint[]) AS r(address, n)));

-- name: MessageIDsHeld :many
-- Which of the given ids a message moved into the queue (requeue,
-- dead-letter) holds: one without an idempotency key to answer a send of
-- its id, so that the send fails on the unique index. A send that is not
-- all or nothing refuses those messages alone.
-- Each id is probed by a range in id order, which only
-- messages_message_id_queue_key serves (sorts are off), and its key by a
-- subquery a plan cannot turn into a join: planned on drained statistics,
-- `message_id = ANY(…)` was a filter over the whole primary key and the
-- NOT EXISTS an anti join that walked dedup_keys_pkey per message.
SELECT m.message_id
FROM skipq.queues q
CROSS JOIN unnest(@message_ids::text[]) AS k(message_id)
CROSS JOIN LATERAL (SELECT m.message_id, m.queue_id FROM skipq.messages m
                    WHERE m.message_id >= k.message_id AND m.message_id <= k.message_id AND m.queue_id = q.id
                    ORDER BY m.message_id LIMIT 1) m
WHERE q.tenant = @tenant AND q.name = @queue
  AND (SELECT d.sequence FROM skipq.dedup_keys d
       WHERE d.queue_id = m.queue_id AND d.message_id = m.message_id LIMIT 1) IS NULL;

-- name: MessageTraceOf :one
-- The trace of a message of the queue (docs/API.md#history): its own while it
-- exists ('' when untraced), else that of the latest event by which it left
-- the queue (gone, or moved on). No row: the message never existed (or its history
-- was pruned).
SELECT t.trace_id, t.present FROM (
    SELECT coalesce(m.tags->>'skipq.trace', '')::text AS trace_id, true AS present
    FROM skipq.messages m WHERE m.message_id = @message_id AND m.queue_id + 0 = @queue_id
    UNION ALL
    (SELECT e.trace_id::text, false FROM skipq.message_events e
     WHERE e.queue_id = @queue_id AND e.message_id = @message_id
       -- message_events_left_idx's predicate: the event it left the queue by.
       AND (e.gone_at IS NOT NULL OR e.type IN ('dead_lettered', 'requeued', 'redriven'))
     ORDER BY e.id DESC LIMIT 1)) t
ORDER BY t.present DESC
LIMIT 1;

-- name: MessageEventsOfTrace :many
-- A trace's events, oldest first, with the name of the queue each happened
-- in ('' if it was deleted since).
SELECT e.type, e.at, coalesce(q.name, '')::text AS queue, e.message_id, e.key_id, e.detail
FROM skipq.message_events e
LEFT JOIN skipq.queues q ON q.id = e.queue_id
WHERE e.trace_id = @trace_id::bigint
ORDER BY e.id
LIMIT @max_events;

-- name: MessageEventsPrune :execrows
-- Worker: removes the history of up to @max_traces messages gone more than
-- @keep_seconds ago (message_events_gone_idx). The recheck of the message
-- keeps a trace whose message came back under it (a retained message's
-- acked event is marked gone only when its retention ends).
-- The message is probed by a range of its id in id order, which only
-- messages_message_id_queue_key serves (sorts are off), and the trace's
-- events are deleted by address: planned on drained statistics, the NOT
-- EXISTS became an anti join that walked that index for every event, and
-- `trace_id IN (old)` a semi join that ran the whole selection again for
-- every event of the table. An event changed meanwhile (a retained
-- message's acked event marked gone) is not at its address any more and
-- waits for the next run.
WITH old AS (
    SELECT e.trace_id FROM skipq.message_events e
    WHERE e.gone_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @keep_seconds::integer)
      AND (SELECT m.sequence FROM skipq.messages m
           WHERE m.message_id >= e.message_id AND m.message_id <= e.message_id AND m.queue_id = e.queue_id
             AND m.tags->>'skipq.trace' = e.trace_id::text
           ORDER BY m.message_id LIMIT 1) IS NULL
    ORDER BY e.gone_at
    LIMIT @max_traces
)
DELETE FROM skipq.message_events x
WHERE x.ctid = ANY(ARRAY(SELECT y.ctid FROM old o
                         CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.message_events y
                                             WHERE y.trace_id = o.trace_id ORDER BY y.id) y));

-- name: ReadyStaleRemove :execrows
-- Worker: removes ready rows whose message is gone or no longer ready, from
-- the first @per_queue ready rows of every queue (where claims step over
-- them). The invariant (messages.ready = a row in skipq.ready) holds for
-- every committed statement but one race: a statement that settles or
-- moves a delivery whose lease ran out (ack, extend, requeue, an operator
-- delete or purge) waits for the worker readying that message, then goes
-- on with the message's newest version, while its own ready-row lookup
-- reads its snapshot, taken before the worker's ready row was committed
-- (internal/db/ready_race_test.go). A message that still exists is locked first
-- (the lock order of every statement that waits for a lock: message, then
-- its ready row; a claim takes them the other way round but never waits)
-- and judged on its newest version; one that is gone never comes back
-- (sequences are not reused). The queues with ready rows are found with a
-- loose index scan of ready_pkey (one descent per queue). Each message is
-- probed by the primary key's bounded range (docs/DESIGN.md, "Settling by
-- address"): planned on drained statistics, the NOT EXISTS was an anti
-- join that walked the whole primary key for the heads.
WITH RECURSIVE queues(queue_id) AS (
    (SELECT r.queue_id FROM skipq.ready r ORDER BY r.queue_id LIMIT 1)
    UNION ALL
    SELECT (SELECT r.queue_id FROM skipq.ready r WHERE r.queue_id > q.queue_id ORDER BY r.queue_id LIMIT 1)
    FROM queues q WHERE q.queue_id IS NOT NULL
), heads AS (
    SELECT h.queue_id, h.sequence FROM queues q
    CROSS JOIN LATERAL (SELECT r.queue_id, r.sequence FROM skipq.ready r
                        WHERE r.queue_id = q.queue_id ORDER BY r.sequence LIMIT @per_queue::integer) h
    WHERE q.queue_id IS NOT NULL
), stale AS (
    SELECT h.queue_id, h.sequence FROM heads h
    WHERE (SELECT m.sequence FROM skipq.messages m
           WHERE m.queue_id = h.queue_id AND m.sequence >= h.sequence AND m.sequence <= h.sequence
           ORDER BY m.sequence LIMIT 1) IS NULL
    UNION ALL
    SELECT m.queue_id, m.sequence FROM heads h
    CROSS JOIN LATERAL (SELECT m.queue_id, m.sequence FROM skipq.messages m
                        WHERE m.queue_id = h.queue_id AND m.sequence >= h.sequence AND m.sequence <= h.sequence
                          AND NOT m.ready
                        ORDER BY m.sequence LIMIT 1
                        FOR UPDATE SKIP LOCKED) m
)
DELETE FROM skipq.ready r
WHERE r.ctid = ANY(ARRAY(
    SELECT y.ctid FROM stale s
    CROSS JOIN LATERAL (SELECT y.ctid FROM skipq.ready y
                        WHERE y.queue_id = s.queue_id AND y.sequence = s.sequence LIMIT 1) y));
