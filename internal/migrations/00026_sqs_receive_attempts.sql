-- +goose Up
-- SQS ReceiveRequestAttemptId on FIFO queues (SPEC §11.16 D6): a receive
-- that names an attempt id records the messages it handed out (their
-- sequences and lease tokens, which make their receipt handles), and a retry
-- of the same attempt within five minutes gets the same messages and handles
-- back while they are all still in flight with those leases. A retry may
-- reach any node, so the record is a row. Rows older than five minutes are
-- pruned by the next recorded attempt on the queue; the queue's deletion
-- removes its rows.
CREATE TABLE skipq.sqs_receive_attempts (
    queue_id   bigint      NOT NULL, -- no foreign key: it would lock skipq.queues (QueueDelete deletes the rows)
    attempt_id text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sequences  bigint[]    NOT NULL,
    tokens     bytea[]     NOT NULL,
    PRIMARY KEY (queue_id, attempt_id)
);
CREATE INDEX sqs_receive_attempts_age_idx ON skipq.sqs_receive_attempts (queue_id, created_at);

-- +goose Down
DROP TABLE skipq.sqs_receive_attempts;
