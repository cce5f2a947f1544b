package db

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the newest migration applied to the database. It reads
// goose's own table, which is not part of the schema sqlc compiles, so this
// one statement lives here rather than in internal/queries/.
func SchemaVersion(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var v int64
	err := direct{pool: pool}.QueryRow(ctx,
		"SELECT coalesce(max(version_id), 0) FROM skipq_goose_version WHERE is_applied").Scan(&v)
	return v, err
}
