-- +goose Up
-- The metrics gauges' snapshot. Counting every queue's messages reads the
-- whole messages table (1.2 s at a 1,000,000-message backlog on 2 vCPUs), so
-- one node at a time refreshes this snapshot at most every 15 s, and every
-- node exports it by reading this small table.
CREATE TABLE skipq.queue_counts (
    queue_id            bigint PRIMARY KEY,
    tenant              text        NOT NULL,
    name                text        NOT NULL,
    available           bigint      NOT NULL,
    delayed             bigint      NOT NULL,
    in_flight           bigint      NOT NULL,
    oldest_available_at timestamptz,
    counted_at          timestamptz NOT NULL
);

-- When each cluster-wide periodic job last ran: a node takes a job's turn
-- by moving its row forward, so the job runs once per period whatever the
-- number of nodes.
CREATE TABLE skipq.job_turns (
    job      text PRIMARY KEY,
    last_run timestamptz NOT NULL
);
INSERT INTO skipq.job_turns (job, last_run) VALUES ('queue_counts', '-infinity'), ('vacuum', '-infinity');

-- +goose Down
DROP TABLE skipq.job_turns;
DROP TABLE skipq.queue_counts;
