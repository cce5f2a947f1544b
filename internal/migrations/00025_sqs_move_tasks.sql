-- +goose Up
-- SQS message move tasks (SPEC §11.5: StartMessageMoveTask,
-- ListMessageMoveTasks, CancelMessageMoveTask) on top of the native bulk
-- redrive. A task runs on the node that started it, one redrive transaction
-- at a time; its row is how every node sees its status and progress, how a
-- cancel reaches the node running it, and how another node takes it over
-- when that node stopped (runner and heartbeat_at: the runner writes the
-- heartbeat after every step; a task whose heartbeat is older than a minute
-- is taken by the next node that lists it). Removed with the source queue.
CREATE TABLE skipq.sqs_move_tasks (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_queue_id bigint      NOT NULL, -- no foreign key: it would lock skipq.queues (QueueDelete deletes the rows)
    -- The destination queue's name; '' sends each message back to the
    -- queue it was dead-lettered from (the native redrive's default).
    destination     text        NOT NULL,
    max_per_second  integer,
    status          text        NOT NULL DEFAULT 'RUNNING'
                    CHECK (status IN ('RUNNING', 'CANCELLING', 'COMPLETED', 'CANCELLED', 'FAILED')),
    moved           bigint      NOT NULL DEFAULT 0,
    to_move         bigint      NOT NULL,
    failure_reason  text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    runner          uuid        NOT NULL,
    heartbeat_at    timestamptz NOT NULL DEFAULT now()
);
-- At most one active task per source queue, as SQS, whichever node starts it.
CREATE UNIQUE INDEX sqs_move_tasks_active_idx ON skipq.sqs_move_tasks (source_queue_id)
    WHERE status IN ('RUNNING', 'CANCELLING');
-- ListMessageMoveTasks: a source's most recent tasks.
CREATE INDEX sqs_move_tasks_source_idx ON skipq.sqs_move_tasks (source_queue_id, id DESC);

-- +goose Down
DROP TABLE skipq.sqs_move_tasks;
