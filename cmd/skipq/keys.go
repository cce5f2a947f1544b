package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/sqs"
)

const keysUsage = `skipq keys create --tenant T --role read|write|admin --name N
                                 print a new key's secret (--json: also its id)
       skipq keys list           every key: ID, tenant, role, name, SQS access key id
       skipq keys revoke ID      revoke key ID
       skipq keys sqs-credentials ID
                                 key ID's SQS access key id and secret (needs SKIPQ_SIGV4_MASTER_KEY)
  Keys live in the database: every verb needs SKIPQ_DATABASE_URL (or --database-url).
  A key's ID is the first column of 'skipq keys list' (or the id of 'create --json').`

// cmdKeys manages API keys directly in the database (it needs only the
// database URL): create prints the new secret, and only the secret.
func cmdKeys(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	databaseURL := fs.String("database-url", node.DatabaseURLFromEnv(), "Postgres URL ($SKIPQ_DATABASE_URL or $DATABASE_URL)")
	tenant := fs.String("tenant", "", "the key's tenant (create)")
	role := fs.String("role", "", "read, write or admin (create)")
	name := fs.String("name", "", "a name for the key (create)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := cliParse(fs, args, keysUsage)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("keys", "keys needs a verb: create, list, revoke or sqs-credentials")
	}
	if *databaseURL == "" {
		return fmt.Errorf("%w: skipq keys works on the database directly: set SKIPQ_DATABASE_URL (or DATABASE_URL, or --database-url)", errUsage)
	}
	pool, err := db.NewPool(ctx, *databaseURL, db.PoolOptions{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer pool.Close()
	apiKeys := auth.New(pool, 0)

	switch verb := pos[0]; {
	case verb == "create" && len(pos) == 1:
		if *tenant == "" || *role == "" || *name == "" {
			return usageErr("keys", "create needs --tenant, --role and --name")
		}
		key, secret, err := apiKeys.Create(ctx, *tenant, *role, *name)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(map[string]any{"id": key.ID, "tenant": key.Tenant, "role": key.Role, "name": key.Name, "secret": secret})
		}
		fmt.Println(secret)
		return nil
	case verb == "list" && len(pos) == 1:
		keys, err := apiKeys.List(ctx)
		if err != nil {
			return err
		}
		akids, err := apiKeys.SQSAccessKeyIDs(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]map[string]any, len(keys))
			for i, k := range keys {
				out[i] = map[string]any{"id": k.ID, "tenant": k.Tenant, "role": k.Role, "name": k.Name,
					"createdAt": k.CreatedAt.UTC().Format(time.RFC3339), "revokedAt": formatTimePtr(k.RevokedAt),
					"sqsAccessKeyId": nilIfEmpty(akids[k.ID])}
			}
			return printJSON(map[string]any{"keys": out})
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tROLE\tNAME\tCREATED\tREVOKED\tSQS_ACCESS_KEY_ID")
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.UTC().Format(time.RFC3339)
			}
			akid := akids[k.ID]
			if akid == "" {
				akid = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Role, k.Name, k.CreatedAt.UTC().Format(time.RFC3339), revoked, akid)
		}
		return tw.Flush()
	case verb == "sqs-credentials" && len(pos) == 2:
		return printSQSCredentials(ctx, apiKeys, pos[1], *asJSON)
	case verb == "revoke" && len(pos) == 2:
		id, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil {
			return usageErr("keys", "key id %q is not a number", pos[1])
		}
		key, err := apiKeys.Revoke(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(map[string]any{"id": key.ID, "revokedAt": formatTimePtr(key.RevokedAt)})
		}
		fmt.Printf("revoked key %d (%s)\n", key.ID, key.Name)
		return nil
	}
	return usageErr("keys", "unknown keys verb or wrong arguments: %s", strings.Join(pos, " "))
}

func formatTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// printSQSCredentials prints a key's SQS credentials (docs/SQS.md#authentication-and-roles),
// giving it an access key id on first use; the secret is derived from
// SKIPQ_SIGV4_MASTER_KEY and never stored, so this can be re-run.
func printSQSCredentials(ctx context.Context, apiKeys *auth.Keys, arg string, asJSON bool) error {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return usageErr("keys", "key id %q is not a number", arg)
	}
	raw := os.Getenv("SKIPQ_SIGV4_MASTER_KEY")
	if raw == "" {
		return errors.New("SKIPQ_SIGV4_MASTER_KEY is not set: SQS secrets are derived from it (the same value every node has)")
	}
	master, err := sqs.ParseMasterKey(raw)
	if err != nil {
		return err
	}
	akid, err := apiKeys.SQSCredentials(ctx, id, sqs.NewAccessKeyID)
	if err != nil {
		return err
	}
	secret := sqs.DeriveSecret(master, akid)
	if asJSON {
		return printJSON(map[string]any{"id": id, "accessKeyId": akid, "secretAccessKey": secret})
	}
	fmt.Printf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", akid, secret)
	return nil
}
