-- name: APIKeyCreate :one
INSERT INTO skipq.api_keys (tenant, role, name, secret_hash)
VALUES (@tenant, @role, @name, @secret_hash)
RETURNING *;

-- name: APIKeyGetBySecretHash :one
-- Authentication: a key that is not revoked, found by the unique index.
SELECT * FROM skipq.api_keys
WHERE secret_hash = @secret_hash AND revoked_at IS NULL;

-- name: APIKeyList :many
SELECT * FROM skipq.api_keys ORDER BY id;

-- name: APIKeyRevoke :one
UPDATE skipq.api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE id = @id
RETURNING *;
