-- +goose Up
-- The queue setting of SPEC §16.4 (retention of acked messages, migration
-- 00031), in a migration of its own: its transaction holds the ACCESS
-- EXCLUSIVE lock of ADD COLUMN on skipq.queues (which nearly every request
-- reads) only for the moment the column takes, not while 00031 replaces
-- functions. A constant default: no rewrite. The lock does not queue behind
-- a long transaction (docs/DESIGN.md, "Online migrations").
SET LOCAL lock_timeout = '2s';
ALTER TABLE skipq.queues ADD COLUMN retain_acked_seconds integer NOT NULL DEFAULT 0;

-- +goose Down
SET LOCAL lock_timeout = '2s';
ALTER TABLE skipq.queues DROP COLUMN retain_acked_seconds;
