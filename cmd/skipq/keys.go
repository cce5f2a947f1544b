package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/skipq/skipq/db"
	"github.com/skipq/skipq/node"
	"github.com/skipq/skipq/service"
)

const keysUsage = "skipq keys create --tenant T --role read|write|admin --name N | list | revoke ID"

// cmdKeys manages API keys directly in the database (it needs only the
// database URL): create prints the new secret, and only the secret.
func cmdKeys(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	databaseURL := fs.String("database-url", node.DatabaseURLFromEnv(), "Postgres URL ($SKIPQ_DATABASE_URL or $DATABASE_URL)")
	tenant := fs.String("tenant", "", "the key's tenant (create)")
	role := fs.String("role", "", "read, write or admin (create)")
	name := fs.String("name", "", "a name for the key (create)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: %s", errUsage, keysUsage)
	}
	if *databaseURL == "" {
		return fmt.Errorf("SKIPQ_DATABASE_URL (or DATABASE_URL) is required")
	}
	pool, err := db.NewPool(ctx, *databaseURL, db.PoolOptions{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer pool.Close()
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits()})

	switch verb := pos[0]; {
	case verb == "create" && len(pos) == 1:
		if *tenant == "" || *role == "" || *name == "" {
			return fmt.Errorf("%w: %s", errUsage, keysUsage)
		}
		key, secret, err := svc.CreateKey(ctx, *tenant, *role, *name)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(map[string]any{"id": key.ID, "tenant": key.Tenant, "role": key.Role, "name": key.Name, "secret": secret})
		}
		fmt.Println(secret)
		return nil
	case verb == "list" && len(pos) == 1:
		keys, err := svc.ListKeys(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]map[string]any, len(keys))
			for i, k := range keys {
				out[i] = map[string]any{"id": k.ID, "tenant": k.Tenant, "role": k.Role, "name": k.Name,
					"createdAt": k.CreatedAt.UTC().Format(time.RFC3339), "revokedAt": formatTimePtr(k.RevokedAt)}
			}
			return printJSON(map[string]any{"keys": out})
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tROLE\tNAME\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Role, k.Name, k.CreatedAt.UTC().Format(time.RFC3339), revoked)
		}
		return tw.Flush()
	case verb == "revoke" && len(pos) == 2:
		id, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil {
			return fmt.Errorf("%w: key id %q is not a number", errUsage, pos[1])
		}
		key, err := svc.RevokeKey(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(map[string]any{"id": key.ID, "revokedAt": formatTimePtr(key.RevokedAt)})
		}
		fmt.Printf("revoked key %d (%s)\n", key.ID, key.Name)
		return nil
	}
	return fmt.Errorf("%w: %s", errUsage, keysUsage)
}

func formatTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}
