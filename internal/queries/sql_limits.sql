-- name: SQLLimitsPublish :execrows
-- A node's SKIPQ_MAX_* become the limits skipq.send enforces
-- (internal/migrations/00006), so SQL and HTTP refuse the same messages. Rows that
-- already hold the value are left alone: no dead tuple, no updated_at change
-- and 0 rows when nothing changed.
INSERT INTO skipq.sql_limits AS l (name, value)
VALUES ('max_message_bytes', @max_message_bytes::integer),
       ('max_delay_seconds', @max_delay_seconds::integer),
       ('max_expiration_seconds', @max_expiration_seconds::integer),
       ('max_receive_count', @max_receive_count::integer)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = now()
WHERE l.value <> excluded.value;
