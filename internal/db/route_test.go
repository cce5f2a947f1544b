package db

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// packageStatements are the statements this package runs, by name: every
// string constant that starts with a "-- name:" line, sqlc's and the
// hand-written ones alike.
func packageStatements(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	statements := map[string]string{}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && statementName(s) != "" {
				statements[statementName(s)] = s
			}
			return true
		})
	}
	if len(statements) < 50 {
		t.Fatalf("found %d statements in the package: the parse is wrong", len(statements))
	}
	return statements
}

var (
	skipqFunction = regexp.MustCompile(`skipq\.(\w+)\(`)
	skipqRelation = regexp.MustCompile(`skipq\.(\w+)\b[^(]`)
)

// Every statement that is only a call of a function carrying its own plan
// settings runs direct (piping them again would cost a statement a call),
// and every name routed direct is a statement that exists.
func TestDirectStatementsAgreeWithTheFunctions(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rows, err := pool.Query(ctx, `SELECT DISTINCT p.proname FROM pg_proc p
		WHERE p.pronamespace = 'skipq'::regnamespace
		  AND EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'enable_%=off')`)
	if err != nil {
		t.Fatal(err)
	}
	carriesSettings := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		carriesSettings[name] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !carriesSettings["message_claim"] {
		t.Fatal("skipq.message_claim carries no plan settings: the catalog query is wrong")
	}

	statements := packageStatements(t)
	for name, sql := range statements {
		body := sql[strings.IndexByte(sql, '\n')+1:]
		calls := skipqFunction.FindAllStringSubmatch(body, -1)
		if len(calls) != 1 || skipqRelation.MatchString(body) || !carriesSettings[calls[0][1]] {
			continue
		}
		if !directStatements[name] {
			t.Errorf("%s only calls skipq.%s, which carries its own plan settings: list it in directStatements", name, calls[0][1])
		}
	}
	for name := range directStatements {
		if _, ok := statements[name]; !ok {
			t.Errorf("directStatements names %s, which is no statement of the package", name)
		}
	}
}

func TestStatementName(t *testing.T) {
	for sql, want := range map[string]string{
		"-- name: MessageClaim :many\nSELECT 1": "MessageClaim",
		"-- name: X":                            "X",
		"SELECT 1":                              "",
		"--name: X :one\nSELECT 1":              "",
	} {
		if got := statementName(sql); got != want {
			t.Errorf("statementName(%q) = %q, want %q", sql, got, want)
		}
	}
}
