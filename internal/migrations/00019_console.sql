-- +goose Up
-- The web console (SPEC §14).
--
-- The gauge snapshot also counts, per queue, the messages that sit in
-- dead-letter queues with reRoutedFrom = that queue: the console's
-- dead-lettered column, read from this small table instead of counting
-- the messages table per page view.
ALTER TABLE skipq.queue_counts ADD COLUMN dead_lettered bigint NOT NULL DEFAULT 0;

-- Depth history for the console's charts: the gauge snapshot copied once a
-- minute (job "depth_history") and kept 24 h. One row per snapshot time in
-- depth_snapshots, so a chart knows when a snapshot was taken even where a
-- queue had no row; depth_history holds only queues with some message (and
-- at most the 1,000 deepest per snapshot), so the table stays under
-- 1,440 × 1,000 rows whatever the number of queues.
CREATE TABLE skipq.depth_snapshots (
    at timestamptz PRIMARY KEY
);
CREATE TABLE skipq.depth_history (
    queue_id      bigint      NOT NULL,
    tenant        text        NOT NULL,
    at            timestamptz NOT NULL,
    available     bigint      NOT NULL,
    delayed       bigint      NOT NULL,
    in_flight     bigint      NOT NULL,
    dead_lettered bigint      NOT NULL,
    -- A queue's chart.
    PRIMARY KEY (queue_id, at)
);
-- A tenant's chart (the queues page).
CREATE INDEX depth_history_tenant_at_idx ON skipq.depth_history (tenant, at);
-- Pruning rows older than 24 h, oldest first.
CREATE INDEX depth_history_at_idx ON skipq.depth_history (at);

INSERT INTO skipq.job_turns (job, last_run) VALUES ('depth_history', '-infinity');

-- +goose Down
DELETE FROM skipq.job_turns WHERE job = 'depth_history';
DROP TABLE skipq.depth_history;
DROP TABLE skipq.depth_snapshots;
ALTER TABLE skipq.queue_counts DROP COLUMN dead_lettered;
