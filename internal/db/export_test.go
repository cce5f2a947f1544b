package db

import "github.com/jackc/pgx/v5/pgxpool"

// The two ways a statement reaches Postgres, for the tests of each.
func Planned(pool *pgxpool.Pool) DBTX { return planned{pool: pool} }
func Direct(pool *pgxpool.Pool) DBTX  { return direct{pool: pool} }
