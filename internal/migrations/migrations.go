// Package migrations holds skipq's schema as goose SQL migrations, embedded in
// the binary, and runs them.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io"
	"io/fs"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files (*.sql at its root).
//
//go:embed *.sql
var FS embed.FS

// lockID is goose's advisory lock key for skipq: many nodes starting at once
// apply each migration exactly once.
const lockID = 0x736b697071 // "skipq"

func newProvider(databaseURL string) (*goose.Provider, *sql.DB, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithSessionLocker(locker),
		goose.WithTableName("skipq_goose_version"),
	)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, db, nil
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" database/sql driver

// Up applies every pending migration.
func Up(ctx context.Context, databaseURL string) error {
	p, db, err := newProvider(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// Down rolls back the most recent migration.
func Down(ctx context.Context, databaseURL string) error {
	p, db, err := newProvider(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := p.Down(ctx); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Status writes each migration's state to w.
func Status(ctx context.Context, databaseURL string, w io.Writer) error {
	p, db, err := newProvider(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	statuses, err := p.Status(ctx)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	for _, s := range statuses {
		applied := "pending"
		if s.State == goose.StateApplied {
			applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		fmt.Fprintf(w, "%05d %-40s %s\n", s.Source.Version, s.Source.Path, applied)
	}
	return nil
}

// Latest is the version of the newest migration the binary carries; /readyz
// compares the database against it.
func Latest() (int64, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, name := range names {
		version, err := goose.NumericComponent(name)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", name, err)
		}
		latest = max(latest, version)
	}
	return latest, nil
}
