package db

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The two ways a statement reaches Postgres, for the tests of each.
func Planned(pool *pgxpool.Pool) DBTX { return planned{pool: pool} }
func Direct(pool *pgxpool.Pool) DBTX  { return direct{pool: pool} }

// ScanMessages is scanMessages, for its test against pgx's Scan.
func ScanMessages(rows pgx.Rows, hint int) ([]SkipqMessage, error) {
	return scanMessages(rows, hint, nil)
}

// MessageColumns are the columns ScanMessages reads.
const MessageColumns = messageColumns
