-- +goose Up
-- API keys: only a SHA-256 of each secret is stored. Secrets are 256 random
-- bits, so a fast unsalted hash is enough (nothing to brute-force), and it
-- lets a request's key be found by an index lookup on its hash.
CREATE TABLE skipq.api_keys (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant      text        NOT NULL,
    role        text        NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    name        text        NOT NULL,
    secret_hash bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    -- Authentication looks a presented key up by its hash.
    CONSTRAINT api_keys_secret_hash_key UNIQUE (secret_hash)
);

-- GET /v1/dlq: a tenant's dead-lettered messages, newest first. Partial, so
-- only dead-lettered messages are in it, and never touched by a claim (HOT
-- updates stay HOT).
CREATE INDEX messages_dead_lettered_idx ON skipq.messages (dead_lettered_at DESC, sequence DESC)
    WHERE dead_lettered_at IS NOT NULL;

-- +goose Down
DROP INDEX skipq.messages_dead_lettered_idx;
DROP TABLE skipq.api_keys;
