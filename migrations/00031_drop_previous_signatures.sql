-- +goose Up
-- Contract step of migrations 00023 and 00029 (DESIGN.md, online migrations
-- rule 1): the signatures they kept for the nodes of the release before
-- them, which no running node calls any more -- the previous release calls
-- message_nack with reasons (now also with keys, 00030) and the search walk
-- with a group.
DROP FUNCTION skipq.message_nack(timestamptz, bigint[], bigint[], bytea[], integer);
DROP FUNCTION skipq.message_search_walk(bigint[], text[], jsonb, timestamptz, timestamptz, timestamptz, text,
                                        bigint, bigint, bigint, timestamptz);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION skipq.message_nack(p_now timestamp with time zone, p_queue_ids bigint[], p_sequences bigint[], p_tokens bytea[], p_server_max_receive_count integer)
 RETURNS TABLE(queue_id bigint, sequence bigint, token bytea, moved_to bigint, discarded boolean)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY SELECT * FROM skipq.message_nack(p_now, p_queue_ids, p_sequences, p_tokens, NULL::text[],
                                                  p_server_max_receive_count);
END $function$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION skipq.message_search_walk(p_queue_ids bigint[], p_states text[], p_tags jsonb, p_sent_after timestamp with time zone, p_sent_before timestamp with time zone, p_after_sent_at timestamp with time zone, p_after_queue text, p_after_sequence bigint, p_scan_per_queue bigint, p_max_matches bigint, p_now timestamp with time zone)
 RETURNS TABLE(queue_id bigint, queue_name text, sequence bigint, sent_at timestamp with time zone, matched boolean, state text, size bigint, exhausted boolean)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    q record;
    m record;
    v_read bigint;
    v_found bigint;
BEGIN
    FOR q IN SELECT z.id, z.name FROM skipq.queues z WHERE z.id = ANY(p_queue_ids) LOOP
        v_read := 0;
        v_found := 0;
        FOR m IN
            SELECT x.sequence, x.sent_at, s.state,
                   skipq.message_wire_size(x.body, x.body_binary, x.metadata, x.tags, x.message_id,
                       x.client_id, x.re_routed_from) + octet_length(q.name) AS size,
                   (cardinality(p_states) = 0 OR s.state = ANY(p_states))
                   AND x.tags @> p_tags
                   AND (x.expires_at IS NULL OR x.expires_at > v_now) AS ok
            FROM skipq.messages x
            CROSS JOIN LATERAL (SELECT skipq.message_search_state(x.dead_lettered_at, x.visible_at,
                x.receive_count, x.max_receive_count, x.lease_token, v_now) AS state) s
            WHERE x.queue_id = q.id
              AND x.sent_at >= coalesce(p_sent_after, '-infinity')
              AND x.sent_at < coalesce(p_sent_before, 'infinity')
              AND x.sent_at <= coalesce(p_after_sent_at, 'infinity')
              AND (p_after_sent_at IS NULL OR x.sent_at < p_after_sent_at
                   OR (q.name, x.sequence) > (p_after_queue, p_after_sequence))
            ORDER BY x.sent_at DESC, x.sequence
            LIMIT p_scan_per_queue
        LOOP
            v_read := v_read + 1;
            queue_id := q.id; queue_name := q.name; sequence := m.sequence; sent_at := m.sent_at;
            state := m.state; size := m.size;
            IF m.ok THEN
                matched := true; exhausted := false;
                RETURN NEXT;
                v_found := v_found + 1;
                EXIT WHEN v_found >= p_max_matches;
            END IF;
            IF v_read = p_scan_per_queue THEN
                matched := false; exhausted := true;
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;
END
$function$;
-- +goose StatementEnd
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC;
