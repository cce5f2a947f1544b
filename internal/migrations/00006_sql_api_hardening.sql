-- +goose Up
-- Two holes in the SQL API (00002) that a role granted only skipq_producer
-- could use:
--
-- 1. Limits came from custom settings (current_setting('skipq.max_...')),
--    and any session may SET those: `SET skipq.max_message_bytes =
--    '200000000'` let a producer store a 50 MB message. The limits now live
--    in a table only its owner (and the nodes) can write.
-- 2. send and send_batch ran with the caller's rights and the caller's
--    search_path, and called convert_to unqualified: a role with CREATE on
--    public planted public.convert_to(text, text) (an exact match beats
--    pg_catalog's (text, name)) and it ran with the rights of whoever called
--    skipq.send next. Every skipq function now pins its search_path, and the
--    wrappers run as their owner so the producer needs no other function.

-- The limits the SQL API enforces; SPEC §2's defaults until a node writes
-- its configured SKIPQ_MAX_* here at start (service.PublishSQLLimits), so
-- SQL and HTTP agree. No grants: producers must not read or change them.
CREATE TABLE skipq.sql_limits (
    name       text PRIMARY KEY CHECK (name IN ('max_message_bytes', 'max_delay_seconds',
                                                'max_expiration_seconds', 'max_receive_count')),
    value      integer     NOT NULL CHECK (value >= 1),
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO skipq.sql_limits (name, value) VALUES
    ('max_message_bytes', 1048576),
    ('max_delay_seconds', 43200),
    ('max_expiration_seconds', 1209600),
    ('max_receive_count', 1024);

-- Same signature, so enqueue's calls stay as they are. The fallback is no
-- longer used: 00002's fallbacks predate SPEC §2's 14-day expiration, and a
-- silently stale limit is worse than a clear error. A missing row can only
-- come from a hand-made DELETE; any node's start writes it back.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.limit_setting(name text, fallback integer) RETURNS integer
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v integer;
BEGIN
    SELECT l.value INTO v FROM skipq.sql_limits l WHERE l.name = limit_setting.name;
    IF v IS NULL THEN
        RAISE EXCEPTION 'skipq: no % in skipq.sql_limits (a skipq node writes its limits there at start)', name
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v;
END $$;
-- +goose StatementEnd

-- The wrappers, as in 00002 but SECURITY DEFINER with a pinned search_path
-- and qualified calls. Running as the schema owner is what lets skipq_producer
-- lose EXECUTE on enqueue: the producer reaches the tables only through these
-- six entry points, whose arguments enqueue validates as the HTTP API does.
-- The tenant stays an argument, as before: a producer may send to any
-- tenant's queue (SQL access is database-wide, not per API key).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send(
    queue text, body text,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[pg_catalog.convert_to(body, 'UTF8')], false, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send(
    queue text, body bytea,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[body], true, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send(
    queue text, body jsonb,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM skipq.send(queue, body::text, metadata, tags, delay_seconds, expiration_seconds,
                             max_receive_count, dead_letter_queue, message_id, client_id, tenant)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_batch(
    queue text, bodies text[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY(SELECT pg_catalog.convert_to(b, 'UTF8')
                     FROM pg_catalog.unnest(bodies) WITH ORDINALITY AS u(b, n) ORDER BY n),
        false, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_batch(
    queue text, bodies bytea[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, bodies, true, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_batch(
    queue text, bodies jsonb[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM skipq.send_batch(queue, bodies::text[], metadata, tags, delay_seconds,
                                   expiration_seconds, max_receive_count, dead_letter_queue,
                                   message_ids, client_id, tenant)
$$;
-- +goose StatementEnd

-- The helpers run inside enqueue (pinned since 00002) and, for uuid_v7, in
-- the nodes' own queries (queries/messages.sql) under the node's
-- search_path, where a planted operator such as public.*(numeric, integer)
-- would beat pg_catalog's. Every skipq function now pins its search_path so
-- none depends on who calls it. The bodies stay as they were: with the path
-- pinned to pg_catalog, pg_temp an unqualified function or operator can
-- only be pg_catalog's (pg_temp is never searched for those), and their own
-- calls and tables are already skipq-qualified.
--
-- uuid_v7 becomes PL/pgSQL with the same expression: a SQL function with a
-- SET clause is no longer inlined, and called from enqueue's INSERT it was
-- parsed and planned again for every message (measured: 3 to 4 times the
-- cost of an inlined call); PL/pgSQL keeps its compiled form per session.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.uuid_v7() RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid;
END $$;
-- +goose StatementEnd
ALTER FUNCTION skipq.content_hash(bytea, boolean, text, text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION skipq.check(boolean, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION skipq.check_queue_name(text, text) SET search_path = pg_catalog, pg_temp;

-- SPEC §6: skipq_producer may execute send and send_batch and nothing else.
-- 00002 also granted it enqueue, which let it skip the wrappers; they no
-- longer need that. New functions are executable by PUBLIC unless revoked,
-- and ALTER DEFAULT PRIVILEGES IN SCHEMA cannot take away a default that is
-- granted globally (PostgreSQL documents this; tried: it records nothing),
-- so every migration that creates a function must end with this REVOKE;
-- migrations_test.go fails when one does not.
REVOKE EXECUTE ON FUNCTION
    skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text)
FROM skipq_producer;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC;

-- +goose Down
-- Back to exactly version 5, both holes included: a rolled-back schema must
-- be the one the version-5 binary and its documentation describe (limits set
-- with ALTER DATABASE ... SET skipq.max_*).
GRANT EXECUTE ON FUNCTION
    skipq.enqueue(text, bytea[], boolean, text, jsonb, integer, integer, integer, text, text[], text, text)
TO skipq_producer;
ALTER FUNCTION skipq.check_queue_name(text, text) RESET search_path;
ALTER FUNCTION skipq.check(boolean, text) RESET search_path;
ALTER FUNCTION skipq.content_hash(bytea, boolean, text, text, jsonb) RESET search_path;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_batch(
    queue text, bodies jsonb[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM skipq.send_batch(queue, bodies::text[], metadata, tags, delay_seconds,
                                   expiration_seconds, max_receive_count, dead_letter_queue,
                                   message_ids, client_id, tenant)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_batch(
    queue text, bodies bytea[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, bodies, true, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send_batch(
    queue text, bodies text[],
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_ids text[] DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY(SELECT convert_to(b, 'UTF8') FROM unnest(bodies) WITH ORDINALITY AS u(b, n) ORDER BY n),
        false, metadata, tags, delay_seconds, expiration_seconds, max_receive_count,
        dead_letter_queue, message_ids, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send(
    queue text, body jsonb,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM skipq.send(queue, body::text, metadata, tags, delay_seconds, expiration_seconds,
                             max_receive_count, dead_letter_queue, message_id, client_id, tenant)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send(
    queue text, body bytea,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[body], true, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.send(
    queue text, body text,
    metadata text DEFAULT '', tags jsonb DEFAULT '{}', delay_seconds integer DEFAULT NULL,
    expiration_seconds integer DEFAULT NULL, max_receive_count integer DEFAULT NULL,
    dead_letter_queue text DEFAULT NULL, message_id text DEFAULT NULL, client_id text DEFAULT '',
    tenant text DEFAULT 'default')
RETURNS TABLE (message_id text, sequence bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT e.message_id, e.sequence FROM skipq.enqueue(
        queue, ARRAY[convert_to(body, 'UTF8')], false, metadata, tags, delay_seconds, expiration_seconds,
        max_receive_count, dead_letter_queue,
        CASE WHEN message_id IS NULL THEN NULL ELSE ARRAY[message_id] END, client_id, tenant) e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION skipq.limit_setting(name text, fallback integer) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('skipq.' || name, true), '')::integer, fallback)
$$;
-- +goose StatementEnd

DROP TABLE skipq.sql_limits;
