-- +goose Up
-- The SQS endpoint's own state (SPEC §11). Kept in tables of its own so that
-- no hot statement of the native API (send, claim, settle) changes: SQS
-- message attributes travel in the message's tags under the reserved key
-- "skipq.sqs" (native tag keys may not start with "skipq."), which every move
-- (dead-letter, requeue, redrive) already copies.

-- What SQS knows about a queue beyond its native settings: attributes skipq
-- stores without enforcing (Policy, KMS, RedriveAllowPolicy, the retention
-- as set), the queue's tags, its MaximumMessageSize and when SQS last changed
-- it. A queue without a row has SQS's defaults. Deleting the queue deletes
-- its row; the foreign key costs nothing on the message path.
CREATE TABLE skipq.sqs_queues (
    queue_id          bigint      PRIMARY KEY REFERENCES skipq.queues (id) ON DELETE CASCADE,
    attributes        jsonb       NOT NULL DEFAULT '{}',
    tags              jsonb       NOT NULL DEFAULT '{}',
    max_message_bytes integer,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- SQS credentials of an API key (SPEC §11.16 D1): the access key id in
-- clear; the secret is derived from it with the servers' master key and
-- never stored. Revoking the key revokes them (authentication joins
-- api_keys.revoked_at).
CREATE TABLE skipq.sqs_credentials (
    access_key_id text   PRIMARY KEY,
    key_id        bigint NOT NULL UNIQUE REFERENCES skipq.api_keys (id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE skipq.sqs_credentials;
DROP TABLE skipq.sqs_queues;
