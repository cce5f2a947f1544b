package main

// Black-box tests of the client verbs (queues, send, receive, ack, nack,
// dlq, tail): the binary built by TestMain against a real `skipq serve`.
// The --json outputs are compared with golden files in testdata/cli/ after
// volatile fields are normalised; `go test -run CLI -update` (or
// SKIPQ_UPDATE_GOLDEN=1) rewrites them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skipq/skipq/client"
	"github.com/skipq/skipq/internal/testdb"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the CLI tests")

// cli runs client verbs of the binary against one node.
type cli struct {
	t   *testing.T
	url string
	env []string
}

func newCLI(t *testing.T, p *process, env ...string) *cli {
	return &cli{t: t, url: "http://" + p.addr, env: env}
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

func (c *cli) command(stdin *string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SKIPQ_URL="+c.url, "SKIPQ_API_KEY=")
	cmd.Env = append(cmd.Env, c.env...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(*stdin)
	}
	return cmd
}

// runIn runs the binary with stdin (nil: /dev/null) and returns what it
// printed and its exit status.
func (c *cli) runIn(stdin *string, args ...string) result {
	c.t.Helper()
	cmd := c.command(stdin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else if err != nil {
		c.t.Fatalf("skipq %v: %v", args, err)
	}
	return r
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runIn(nil, args...)
}

// ok runs a verb that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("skipq %s: %v", strings.Join(args, " "), r)
	}
	return r.stdout
}

// okJSON runs a verb with --json that must succeed and decodes its output.
func (c *cli) okJSON(out any, args ...string) string {
	c.t.Helper()
	s := c.ok(args...)
	if err := json.Unmarshal([]byte(s), out); err != nil {
		c.t.Fatalf("skipq %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, s)
	}
	return s
}

// fails runs a verb that must exit with code and returns its stderr.
func (c *cli) fails(code int, args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code {
		c.t.Fatalf("skipq %s: want exit %d, got %v", strings.Join(args, " "), code, r)
	}
	return r.stderr
}

// client returns a Go client of the same node, for setting up state.
func (c *cli) client() *client.Client {
	cl, err := client.New(c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// Golden files.

var (
	uuidRE     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	apiTimeRE  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	volatileRE = regexp.MustCompile(`"(createdAt|sentAt|firstReceivedAt|visibleUntil|visibleAt|delayedTo|expiresAt|deadLetteredAt|at|oldestAvailableAt|messageId|newMessageId|receiptHandle)":( ?)"([^"]*)"|"sequence":( ?)\d+`)
)

// normalise replaces what differs between runs in a JSON output, keeping
// it as printed otherwise: timestamps (which must be RFC 3339 UTC with
// milliseconds), server-made message ids (UUIDv7), receipt handles and
// sequences. Nulls stay null, so a golden file still says which fields are
// set.
func normalise(t *testing.T, out string) string {
	t.Helper()
	return volatileRE.ReplaceAllStringFunc(out, func(field string) string {
		m := volatileRE.FindStringSubmatch(field)
		key, sp, value := m[1], m[2], m[3]
		switch key {
		case "":
			return `"sequence":` + m[4] + `"<sequence>"`
		case "messageId", "newMessageId":
			if !uuidRE.MatchString(value) {
				return field // client-given: kept
			}
			value = "<uuid>"
		case "receiptHandle":
			value = "<handle>"
		default:
			if !apiTimeRE.MatchString(value) {
				t.Errorf("%s %q is not an API timestamp", key, value)
			}
			value = "<time>"
		}
		return `"` + key + `":` + sp + `"` + value + `"`
	})
}

// golden compares the normalised JSON output with testdata/cli/name.
func golden(t *testing.T, name, out string) {
	t.Helper()
	for line := range strings.Lines(out) {
		if strings.HasSuffix(name, ".jsonl") && !json.Valid([]byte(line)) {
			t.Fatalf("%s: a line is not JSON:\n%s", name, line)
		}
	}
	if !strings.HasSuffix(name, ".jsonl") && !json.Valid([]byte(out)) {
		t.Fatalf("%s: not JSON:\n%s", name, out)
	}
	got := normalise(t, out)
	path := filepath.Join("testdata", "cli", name)
	if *updateGolden || os.Getenv("SKIPQ_UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// The tests.

func TestCLIQueues(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))

	// Flags after the positional arguments…
	golden(t, "queues_create.json", c.ok("queues", "create", "orders", "--max-receive", "3",
		"--dlq", "orders.dlq", "--visibility", "30", "--dedup-window", "10m", "--json"))
	// …and before them; a second create updates only what it names.
	golden(t, "queues_update.json", c.ok("queues", "--json", "create", "--wait", "5s", "--expiration", "3600",
		"--retain-acked", "1h", "orders"))
	out := c.ok("queues", "create", "payments.us-east")
	if !strings.HasPrefix(out, "created queue payments.us-east\n") || !strings.Contains(out, "visibility:") {
		t.Errorf("queues create printed %q", out)
	}

	golden(t, "queues_list.json", c.ok("queues", "list", "--json"))
	var list struct{ Queues []struct{ Name string } }
	c.okJSON(&list, "queues", "list", "--prefix", "pay", "--json")
	if len(list.Queues) != 1 || list.Queues[0].Name != "payments.us-east" {
		t.Errorf("queues list --prefix pay: %+v", list.Queues)
	}
	out = c.ok("queues", "list")
	if !regexp.MustCompile(`(?m)^NAME +VISIBILITY +WAIT .*\norders +30s +5s +0s +3600s +3 +orders.dlq +600s `).MatchString(out) ||
		!strings.Contains(out, "\npayments.us-east ") {
		t.Errorf("queues list printed\n%s", out)
	}

	c.ok("send", "orders", "one")
	c.ok("send", "orders", "two", "--delay", "60")
	golden(t, "queues_get.json", c.ok("queues", "get", "orders", "--json"))
	out = c.ok("queues", "get", "orders")
	for _, want := range []string{"name:", "orders", "available:", "delayed:", "in flight:", "dead-letter queue:",
		"retain acked:       3600s", "acked (retained):"} {
		if !strings.Contains(out, want) {
			t.Errorf("queues get printed no %q:\n%s", want, out)
		}
	}

	golden(t, "queues_purge.json", c.ok("queues", "purge", "orders", "--json"))
	if out := c.ok("queues", "purge", "orders"); out != "purged 0 messages from orders\n" {
		t.Errorf("queues purge printed %q", out)
	}
	golden(t, "queues_delete.json", c.ok("queues", "delete", "--json", "payments.us-east"))
	if got := c.fails(1, "queues", "get", "payments.us-east"); got != "skipq: not_found: queue \"payments.us-east\" does not exist\n" {
		t.Errorf("get of a deleted queue: stderr %q", got)
	}
	if got := c.fails(1, "queues", "delete", "payments.us-east"); !strings.HasPrefix(got, "skipq: not_found: ") {
		t.Errorf("delete of a deleted queue: stderr %q", got)
	}
	if out := c.ok("queues", "delete", "orders"); out != "deleted queue orders\n" {
		t.Errorf("queues delete printed %q", out)
	}
}

func TestCLISendReceiveSettle(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))

	golden(t, "send.json", c.ok("send", "jobs", "hello", "--tag", "kind=greeting", "--tag", "lang=en",
		"--id", "job-1", "--metadata", "meta", "--client-id", "cli", "--max-receive", "5", "--dlq", "jobs.dlq", "--json"))
	// The same id and content again is a duplicate; flags before the queue.
	var dup struct {
		MessageID string
		Duplicate bool
	}
	c.okJSON(&dup, "send", "--json", "--id", "job-1", "--tag", "kind=greeting", "--tag", "lang=en",
		"--metadata", "meta", "--client-id", "cli", "--max-receive", "5", "--dlq", "jobs.dlq", "jobs", "hello")
	if dup.MessageID != "job-1" || !dup.Duplicate {
		t.Errorf("resend: %+v, want a duplicate of job-1", dup)
	}
	// Bodies from stdin: with -, and with no body argument when stdin is not a terminal.
	stdin := "from stdin\nline 2\n"
	if r := c.runIn(&stdin, "send", "jobs", "-"); r.code != 0 || !strings.HasPrefix(r.stdout, "sent message ") {
		t.Fatalf("send -: %v", r)
	}
	piped := "piped"
	if r := c.runIn(&piped, "send", "jobs"); r.code != 0 {
		t.Fatalf("send with a piped body: %v", r)
	}
	binaryBody := "\x00\x01\x02\xff"
	if r := c.runIn(&binaryBody, "send", "jobs", "-", "--binary"); r.code != 0 {
		t.Fatalf("send --binary: %v", r)
	}
	var delayed struct{ DelayedTo *string }
	c.okJSON(&delayed, "send", "--delay", "1h", "jobs", "later", "--json")
	if delayed.DelayedTo == nil {
		t.Error("send --delay 1h: no delayedTo")
	}

	out := c.ok("receive", "jobs", "--max", "10", "--wait", "0", "--visibility", "120", "--json")
	golden(t, "receive.json", out)
	var got struct {
		Messages []struct {
			MessageID, ReceiptHandle, Body string
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Messages) != 4 {
		t.Fatalf("receive: %v\n%s", err, out)
	}
	// One trailing newline of stdin is dropped (echo's); the inner one stays.
	if got.Messages[1].Body != strings.TrimSuffix(stdin, "\n") || got.Messages[2].Body != piped || got.Messages[3].Body != "AAEC/w==" {
		t.Errorf("bodies %q %q %q", got.Messages[1].Body, got.Messages[2].Body, got.Messages[3].Body)
	}
	h := func(i int) string { return got.Messages[i].ReceiptHandle }

	golden(t, "ack.json", c.ok("ack", h(0), "--json"))
	golden(t, "nack.json", c.ok("nack", "--json", h(1), h(2)))
	if got := c.fails(1, "ack", h(0)); !strings.HasPrefix(got, "skipq: receipt_stale: ") {
		t.Errorf("a second ack: stderr %q", got)
	}
	// Several handles, one stale: the outcome on stdout, exit 1.
	r := c.run("ack", h(3), h(0), "--json")
	if r.code != 1 || r.stderr != "skipq: 1 of 2 receipt handles settled nothing\n" {
		t.Errorf("ack of a good and a stale handle: %v", r)
	}
	golden(t, "ack_partial.json", r.stdout)

	// The two nacked messages are available again: peek leaves them there.
	golden(t, "receive_peek.json", c.ok("receive", "jobs", "--peek", "--max", "10", "--wait", "0", "--json"))
	out = c.ok("receive", "jobs", "--peek", "--max", "10", "--wait", "0")
	if !regexp.MustCompile(`^SEQUENCE +MESSAGE-ID +GROUP +RECEIVES +TAGS +BODY\n\d+ +\S+ +- +1 +- +from stdin\\nline 2\n\d+ +\S+ +- +1 +- +piped\n$`).MatchString(out) {
		t.Errorf("receive --peek printed\n%s", out)
	}
	// --ack takes them for good.
	out = c.ok("receive", "--ack", "jobs", "--max", "10", "--wait", "0")
	if strings.Contains(out, "RECEIPT-HANDLE") || strings.Count(out, "\n") != 3 {
		t.Errorf("receive --ack printed\n%s", out)
	}
	if r := c.run("receive", "jobs", "--wait", "0"); r.code != 0 || r.stdout != "" || r.stderr != "no messages\n" {
		t.Errorf("receive of an empty queue: %v", r)
	}
	var q struct {
		Stats struct{ Available, Delayed, InFlight int }
	}
	c.okJSON(&q, "queues", "get", "jobs", "--json")
	if q.Stats.Available != 0 || q.Stats.Delayed != 1 || q.Stats.InFlight != 0 {
		t.Errorf("after receive --ack: %+v", q.Stats)
	}

	// The table shows receipt handles, and -q prints only them: enough to
	// settle from a shell.
	c.ok("send", "jobs", "table me")
	out = c.ok("receive", "jobs", "--visibility", "1")
	if !regexp.MustCompile(`^SEQUENCE +MESSAGE-ID +GROUP +RECEIVES +TAGS +BODY +RECEIPT-HANDLE\n\d+ +\S+ +- +1 +- +table me +\S+\n$`).MatchString(out) {
		t.Errorf("receive printed\n%s", out)
	}
	handle := strings.TrimSpace(c.ok("receive", "jobs", "-q", "--wait", "5"))
	if handle == "" || strings.ContainsAny(handle, " \n") {
		t.Fatalf("receive -q printed %q", handle)
	}
	if out := c.ok("nack", "--reason", "bad input", handle); out != "nacked 1 of 1 message\n" {
		t.Errorf("nack printed %q", out)
	}
	var again struct {
		Messages []struct {
			ReceiptHandle string
			LastFailure   *struct{ Cause, Reason string }
		}
	}
	c.okJSON(&again, "receive", "jobs", "--json")
	if len(again.Messages) != 1 || again.Messages[0].LastFailure == nil ||
		*again.Messages[0].LastFailure != (struct{ Cause, Reason string }{"nack", "bad input"}) {
		t.Fatalf("received after nack --reason: %+v", again)
	}
	if out := c.ok("ack", again.Messages[0].ReceiptHandle); out != "acked 1 of 1 message\n" {
		t.Errorf("ack printed %q", out)
	}
}

func TestCLIExitCodes(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	c.ok("queues", "create", "q")
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string // a prefix of what it printed on stderr
	}{
		{[]string{"queues", "list"}, 0, ""},
		{[]string{"queues", "get", "q", "--json"}, 0, ""},
		{[]string{"queues", "-h"}, 0, "Usage: skipq queues list"},
		{[]string{"send", "q", "x", "--url", "http://127.0.0.1:1", "--url", c.url}, 0, ""}, // the last --url wins

		{[]string{"queues", "get", "missing"}, 1, "skipq: not_found: queue \"missing\" does not exist\n"},
		{[]string{"queues", "get", "missing", "--json"}, 1, "skipq: not_found: "},
		{[]string{"queues", "create", "bad name"}, 1, "skipq: invalid_request: "},
		{[]string{"send", "q", "x", "--delay", "999999"}, 1, "skipq: invalid_request: "},
		{[]string{"ack", "forged"}, 1, "skipq: receipt_stale: "},
		{[]string{"dlq", "redrive", "q", "--to", "bad name"}, 1, "skipq: invalid_request: "},
		{[]string{"queues", "list", "--url", "http://127.0.0.1:1"}, 1, "skipq: GET /v1/queues: "},

		{[]string{"queues"}, 2, "skipq: usage: "},
		{[]string{"queues", "get"}, 2, "skipq: usage: queues get needs one queue name"},
		{[]string{"queues", "get", "a", "b"}, 2, "skipq: usage: "},
		{[]string{"queues", "frob", "q"}, 2, "skipq: usage: unknown verb queues frob"},
		{[]string{"queues", "get", "q", "--nope"}, 2, "skipq: usage: flag provided but not defined: -nope"},
		{[]string{"queues", "get", "q", "--visibility", "5"}, 2, "skipq: usage: "},
		{[]string{"queues", "create", "q", "--visibility", "soon"}, 2, "skipq: usage: invalid value \"soon\" for flag -visibility"},
		{[]string{"queues", "create", "q", "--max-receive", "-1"}, 2, "skipq: usage: "},
		{[]string{"send"}, 2, "skipq: usage: send needs a queue"},
		{[]string{"send", "q", "a", "b"}, 2, "skipq: usage: "},
		{[]string{"send", "q", "x", "--tag", "novalue"}, 2, "skipq: usage: invalid value \"novalue\" for flag -tag"},
		{[]string{"receive"}, 2, "skipq: usage: "},
		{[]string{"receive", "q", "--ack", "--peek"}, 2, "skipq: usage: --ack and --peek exclude each other"},
		{[]string{"receive", "q", "--max", "0"}, 2, "skipq: usage: "},
		{[]string{"ack"}, 2, "skipq: usage: ack needs at least one receipt handle"},
		{[]string{"nack", "--json"}, 2, "skipq: usage: "},
		{[]string{"dlq"}, 2, "skipq: usage: "},
		{[]string{"dlq", "redrive"}, 2, "skipq: usage: "},
		{[]string{"dlq", "redrive", "q", "--batch", "10001"}, 2, "skipq: usage: "},
		{[]string{"dlq", "list", "--to", "x"}, 2, "skipq: usage: "},
		{[]string{"tail"}, 2, "skipq: usage: tail needs one queue name"},
		{[]string{"tail", "q", "--url", "ftp://x"}, 2, "skipq: usage: --url: "},
	} {
		r := c.run(tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.stderr) {
			t.Errorf("skipq %s: %v\nwant exit %d and stderr starting %q", strings.Join(tc.args, " "), r, tc.code, tc.stderr)
		}
	}
	// A send with nothing to send: no body argument and stdin is /dev/null.
	if r := c.run("send", "q"); r.code != 1 || !strings.HasPrefix(r.stderr, "skipq: invalid_request: ") {
		t.Errorf("send with an empty stdin: %v", r)
	}
}

func TestCLIAuth(t *testing.T) {
	db := testdb.New(t)
	p := serve(t, db, "SKIPQ_AUTH=required")
	keys := exec.Command(binary, "keys", "create", "--tenant", "acme", "--role", "admin", "--name", "cli")
	keys.Env = append(os.Environ(), "SKIPQ_DATABASE_URL="+db)
	secret, err := keys.Output()
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(secret))

	c := newCLI(t, p)
	if got := c.fails(1, "queues", "list"); !strings.HasPrefix(got, "skipq: unauthenticated: ") {
		t.Errorf("no key: stderr %q", got)
	}
	c.ok("queues", "create", "billing", "--api-key", key)
	withEnv := newCLI(t, p, "SKIPQ_API_KEY="+key)
	var list struct{ Queues []struct{ Name string } }
	withEnv.okJSON(&list, "queues", "list", "--json")
	if len(list.Queues) != 1 || list.Queues[0].Name != "billing" {
		t.Errorf("queues list with $SKIPQ_API_KEY: %+v", list.Queues)
	}
	// Flags override the environment.
	wrong := newCLI(t, p, "SKIPQ_API_KEY=skq_wrong")
	wrong.url = "http://127.0.0.1:1"
	wrong.ok("queues", "get", "billing", "--api-key", key, "--url", c.url)
}

func TestCLIDeadLetters(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	ctx := context.Background()
	cl := c.client()

	// deadLetter sends n messages to queue and nacks each on its only
	// allowed delivery, which moves it to queue.dlq at once.
	deadLetter := func(queue string, n int) {
		t.Helper()
		c.ok("queues", "create", queue, "--max-receive", "1", "--dlq", queue+".dlq")
		msgs := make([]client.Message, n)
		for i := range msgs {
			msgs[i] = client.Message{Body: fmt.Appendf(nil, "%s %d", queue, i), Tags: map[string]string{"n": fmt.Sprint(i)}}
		}
		if _, err := cl.SendBatch(ctx, queue, msgs); err != nil {
			t.Fatal(err)
		}
		rs, err := cl.Receive(ctx, queue, client.ReceiveOptions{MaxMessages: n, WaitSeconds: new(0)})
		if err != nil || len(rs) != n {
			t.Fatalf("received %d of %d: %v", len(rs), n, err)
		}
		handles := make([]string, n)
		for i, r := range rs {
			handles[i] = r.ReceiptHandle
		}
		if res, err := cl.NackAll(ctx, handles); err != nil || res.Succeeded != n {
			t.Fatalf("nack: %+v %v", res, err)
		}
	}
	deadLetter("one", 1)
	deadLetter("many", 25)

	golden(t, "dlq_list.json", c.ok("dlq", "list", "--source", "one", "--json"))
	// Waiting in its dead-letter queue, a dead letter is available there, as
	// on every route; --state dead_lettered is a filter that finds it.
	var found struct {
		Messages []struct{ Queue, State string }
	}
	c.okJSON(&found, "messages", "search", "--queue", "one.dlq", "--state", "dead_lettered", "--json")
	if len(found.Messages) != 1 || found.Messages[0].State != "available" {
		t.Errorf("search --state dead_lettered in one.dlq: %+v", found.Messages)
	}
	if table := c.ok("messages", "search", "--queue", "one.dlq"); !regexp.MustCompile(`(?m)^\S+ +one\.dlq +available `).MatchString(table) {
		t.Errorf("search --queue one.dlq printed\n%s", table)
	}
	out := c.ok("dlq", "list", "--source", "one")
	if !regexp.MustCompile(`^DEAD-LETTERED +QUEUE +FROM +WHY +SEQUENCE +MESSAGE-ID +GROUP +TAGS +BODY\n\S+ +one\.dlq +one +nack ×1 +\d+ +\S+ +- +n=0 +one 0\n$`).MatchString(out) {
		t.Errorf("dlq list printed\n%s", out)
	}
	var none struct{ Messages []any }
	if c.okJSON(&none, "dlq", "list", "--cause", "lease_expired", "--json"); len(none.Messages) != 0 {
		t.Errorf("--cause lease_expired lists %v", none.Messages)
	}
	c.fails(2, "dlq", "list", "--cause", "crash")
	r := c.run("dlq", "list", "--limit", "3", "--json")
	var list struct {
		Messages []struct{ Queue, ReRoutedFrom string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil || len(list.Messages) != 3 ||
		r.stderr != "showing the newest 3 dead-lettered messages; --limit 0 shows all\n" {
		t.Errorf("dlq list --limit 3: %v", r)
	}
	c.okJSON(&list, "dlq", "list", "--limit", "0", "--json")
	if len(list.Messages) != 26 {
		t.Errorf("dlq list --limit 0 listed %d messages, want 26", len(list.Messages))
	}

	// Not on a terminal, the bulk redrive prints a line per batch on stderr
	// and the total on stdout.
	r = c.run("dlq", "redrive", "many.dlq", "--batch", "10")
	wantProgress := "redrive many.dlq: moved 10 of 25, 15 remaining\n" +
		"redrive many.dlq: moved 20 of 25, 5 remaining\n" +
		"redrive many.dlq: moved 25 of 25, 0 remaining\n"
	if r.code != 0 || r.stderr != wantProgress || r.stdout != "moved 25 messages from many.dlq to their source queues\n" {
		t.Errorf("dlq redrive: %v\nwant stderr:\n%s", r, wantProgress)
	}
	var q struct{ Stats struct{ Available int } }
	c.okJSON(&q, "queues", "get", "many", "--json")
	if q.Stats.Available != 25 {
		t.Errorf("after the redrive many has %d available, want 25", q.Stats.Available)
	}
	r = c.run("dlq", "redrive", "many.dlq", "--json")
	if r.code != 0 || r.stderr != "redrive many.dlq: moved 0 of 0, 0 remaining\n" {
		t.Errorf("dlq redrive of an empty queue: %v", r)
	}
	golden(t, "dlq_redrive_empty.json", r.stdout)
	golden(t, "dlq_redrive_to.json", c.ok("dlq", "redrive", "--to", "elsewhere", "one.dlq", "--json"))
	var got struct {
		Messages []struct{ Body, ReRoutedFrom string }
	}
	c.okJSON(&got, "receive", "elsewhere", "--wait", "0", "--json")
	if len(got.Messages) != 1 || got.Messages[0].Body != "one 0" || got.Messages[0].ReRoutedFrom != "one.dlq" {
		t.Errorf("the redriven message: %+v", got.Messages)
	}
	if r := c.run("dlq", "list"); r.code != 0 || r.stdout != "" || r.stderr != "no dead-lettered messages\n" {
		t.Errorf("dlq list after redriving everything: %v", r)
	}
}

// On a terminal, dlq redrive shows a progress bar instead of lines. The
// terminal is script(1)'s pseudo-terminal; without script the test skips.
func TestCLIRedriveProgressBar(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to run skipq on a terminal")
	}
	c := newCLI(t, serve(t, testdb.New(t)))
	ctx := context.Background()
	cl := c.client()
	c.ok("queues", "create", "src", "--max-receive", "1", "--dlq", "src.dlq")
	msgs := make([]client.Message, 30)
	for i := range msgs {
		msgs[i].Body = fmt.Appendf(nil, "m%d", i)
	}
	if _, err := cl.SendBatch(ctx, "src", msgs); err != nil {
		t.Fatal(err)
	}
	rs, err := cl.Receive(ctx, "src", client.ReceiveOptions{MaxMessages: 30, WaitSeconds: new(0)})
	if err != nil || len(rs) != 30 {
		t.Fatalf("received %d of 30: %v", len(rs), err)
	}
	for _, r := range rs {
		if err := r.Nack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(script, "-qec", binary+" dlq redrive src.dlq --batch 10", "/dev/null")
	cmd.Env = append(os.Environ(), "SKIPQ_URL="+c.url, "SKIPQ_API_KEY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if !regexp.MustCompile(`redrive src\.dlq +\d+% \|.*\| \(\d+/30\)`).MatchString(s) ||
		strings.Contains(s, "remaining") || !strings.Contains(s, "moved 30 messages from src.dlq to their source queues") {
		t.Errorf("dlq redrive on a terminal printed %q", s)
	}
}

// tailProcess is a running `skipq tail` whose output lines arrive on lines.
type tailProcess struct {
	cmd        *exec.Cmd
	lines      chan string   // closed when stdout is
	following  chan struct{} // closed at its "following" line on stderr
	stderrDone chan struct{} // closed when stderr is; stderr is complete then
	stderr     bytes.Buffer
}

func startTail(t *testing.T, c *cli, args ...string) *tailProcess {
	t.Helper()
	tp := &tailProcess{cmd: c.command(nil, args...), lines: make(chan string, 100),
		following: make(chan struct{}), stderrDone: make(chan struct{})}
	stdout, err := tp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := tp.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			tp.lines <- sc.Text()
		}
		close(tp.lines)
	}()
	go func() {
		defer close(tp.stderrDone)
		following := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			l := sc.Text()
			tp.stderr.WriteString(l + "\n")
			if !following && strings.HasPrefix(l, "following ") {
				following = true
				close(tp.following)
			}
		}
	}()
	t.Cleanup(func() {
		_ = tp.cmd.Process.Kill()
		tp.drain()
		_ = tp.cmd.Wait()
	})
	return tp
}

// drain reads what is left of stdout and stderr (the process has exited or
// is exiting), as exec.Cmd.Wait wants before it closes the pipes.
func (tp *tailProcess) drain() {
	for range tp.lines {
	}
	<-tp.stderrDone
}

// next waits for the next output line.
func (tp *tailProcess) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-tp.lines:
		if !ok {
			t.Fatal("tail exited")
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("tail printed nothing in 20 s")
	}
	return ""
}

func (tp *tailProcess) waitFollowing(t *testing.T) {
	t.Helper()
	select {
	case <-tp.following:
	case <-time.After(20 * time.Second):
		t.Fatal("tail did not start following in 20 s")
	}
}

// stop signals tail and expects it to exit 0 with nothing more printed.
func (tp *tailProcess) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := tp.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	exited := make(chan []string, 1)
	go func() {
		var more []string
		for l := range tp.lines {
			more = append(more, l)
		}
		<-tp.stderrDone
		exited <- more
	}()
	select {
	case more := <-exited:
		if len(more) > 0 {
			t.Errorf("tail printed %q more after %v", more, sig)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tail did not exit in 20 s")
	}
	if err := tp.cmd.Wait(); err != nil {
		t.Errorf("tail exited with %v after %v; want 0\nstderr: %s", err, sig, tp.stderr.String())
	}
}

func TestCLITail(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))

	// Messages sent after tail started, as lines.
	tp := startTail(t, c, "tail", "feed")
	c.ok("send", "feed", "first", "--tag", "k=v")
	c.ok("send", "feed", "second\nline")
	lineRE := regexp.MustCompile(`^\S+Z  \d+  [0-9a-f-]{36}  available  (\S+)  (.*)$`)
	for _, want := range [][2]string{{"k=v", "first"}, {"-", `second\nline`}} {
		l := tp.next(t)
		if m := lineRE.FindStringSubmatch(l); m == nil || m[1] != want[0] || m[2] != want[1] {
			t.Errorf("tail printed %q; want tags %s and body %s", l, want[0], want[1])
		}
	}
	tp.stop(t, syscall.SIGINT)

	// With --new, only what comes after it caught up; --json prints one
	// object per line; messages delayed or in flight show too.
	c.ok("send", "feed", "old")
	tp = startTail(t, c, "tail", "--json", "feed", "--new")
	tp.waitFollowing(t)
	c.ok("send", "feed", "one", "--id", "msg-1")
	c.ok("send", "feed", "two", "--id", "msg-2", "--delay", "60")
	var lines string
	for range 2 {
		lines += tp.next(t) + "\n"
	}
	golden(t, "tail.jsonl", lines)
	tp.stop(t, syscall.SIGTERM)
}

// skipq messages search finds messages across queues, newest first, with
// the API's filters.
func TestCLIMessagesSearch(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	for _, m := range [][]string{{"orders.eu", "a-1"}, {"billing", "b-1"}, {"orders.us", "a-2"}} {
		c.ok("send", m[0], "body of "+m[1], "--id", m[1], "--tag", "kind="+m[0])
	}
	c.ok("receive", "orders.us", "--wait", "0")
	var out struct {
		Messages []struct{ MessageID, Queue, State string }
	}
	c.okJSON(&out, "messages", "search", "--prefix", "orders.", "--json")
	if len(out.Messages) != 2 || out.Messages[0].MessageID != "a-2" || out.Messages[0].State != "in_flight" ||
		out.Messages[1].MessageID != "a-1" || out.Messages[1].Queue != "orders.eu" {
		t.Fatalf("search --prefix orders.: %+v", out.Messages)
	}
	c.okJSON(&out, "messages", "search", "--queue", "billing", "--queue", "orders.us", "--state", "available", "--json")
	if len(out.Messages) != 1 || out.Messages[0].MessageID != "b-1" {
		t.Fatalf("search --queue billing --queue orders.us --state available: %+v", out.Messages)
	}
	if table := c.ok("messages", "search", "--tag", "kind=billing"); !strings.Contains(table, "b-1") || strings.Contains(table, "a-1") {
		t.Fatalf("search --tag kind=billing printed:\n%s", table)
	}
	c.ok("send", "jobs", "in a group", "--id", "g-1", "--group", "g")
	c.okJSON(&out, "messages", "search", "--group-id", "g", "--json")
	if len(out.Messages) != 1 || out.Messages[0].MessageID != "g-1" {
		t.Fatalf("search --group-id g: %+v", out.Messages)
	}
	c.fails(2, "messages", "search", "--after", "yesterday")
	c.fails(2, "messages", "find")
}

// skipq messages history prints a traced message's events across its
// queues (docs/API.md#history): nacked, extended, dead-lettered, redriven.
func TestCLIMessageHistory(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	ctx := context.Background()
	cl := c.client()
	if out := c.ok("queues", "create", "src", "--trace", "--max-receive", "2", "--dlq", "src.dlq"); !regexp.MustCompile(`(?m)^trace: +true$`).MatchString(out) {
		t.Fatalf("queues create --trace printed\n%s", out)
	}
	c.ok("send", "src", "payload", "--id", "h-1")
	var got struct {
		Messages []struct{ ReceiptHandle string }
	}
	c.okJSON(&got, "receive", "src", "--wait", "0", "--json")
	c.ok("nack", "--reason", "bad input", got.Messages[0].ReceiptHandle)
	c.okJSON(&got, "receive", "src", "--wait", "0", "--json")
	if _, err := cl.ExtendVisibility(ctx, got.Messages[0].ReceiptHandle, time.Minute); err != nil {
		t.Fatal(err)
	}
	c.ok("nack", "--reason", "gave up", got.Messages[0].ReceiptHandle) // the last delivery: to src.dlq
	redriven, err := cl.Redrive(ctx, "src.dlq", "h-1", "")
	if err != nil {
		t.Fatal(err)
	}

	golden(t, "messages_history.json", c.ok("messages", "history", "src", redriven.MessageID, "--json"))
	var h struct {
		Events []struct{ Type, Queue, MessageID string }
	}
	c.okJSON(&h, "messages", "history", "src.dlq", "h-1", "--json")
	var types []string
	for _, e := range h.Events {
		types = append(types, e.Type)
	}
	if want := "sent received nacked received extended nacked dead_lettered redriven"; strings.Join(types, " ") != want {
		t.Errorf("history of the dead-lettered original: %v, want %s", types, want)
	}
	table := c.ok("messages", "history", "src", redriven.MessageID)
	for _, re := range []string{
		`^AT +QUEUE +TYPE +KEY +DETAIL\n`,
		`(?m)^\S+ +src +received +- +receiveCount=2 visibleUntil=\S+$`,
		`(?m)^\S+ +src +nacked +- +reason="bad input"$`,
		`(?m)^\S+ +src +dead_lettered +- +cause=nack reason="gave up" toQueue=src\.dlq$`,
		`(?m)^\S+ +src\.dlq +redriven +- +toQueue=src newMessageId=` + regexp.QuoteMeta(redriven.MessageID) + `$`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("messages history printed no match for %s:\n%s", re, table)
		}
	}

	// An untraced queue's message has no events; a message that never
	// existed is not found; turning trace off is an update like any other.
	c.ok("send", "plain", "x", "--id", "p-1")
	if r := c.run("messages", "history", "plain", "p-1"); r.code != 0 || r.stdout != "" || !strings.HasPrefix(r.stderr, "no history") {
		t.Errorf("history of an untraced message: %v", r)
	}
	if out := c.ok("messages", "history", "plain", "p-1", "--json"); out != "{\n  \"events\": []\n}\n" {
		t.Errorf("history --json of an untraced message: %q", out)
	}
	if got := c.fails(1, "messages", "history", "src", "never"); !strings.HasPrefix(got, "skipq: not_found: ") {
		t.Errorf("history of a message that never existed: %q", got)
	}
	if out := c.ok("queues", "create", "src", "--trace=false"); !regexp.MustCompile(`(?m)^trace: +false$`).MatchString(out) {
		t.Errorf("queues create --trace=false printed\n%s", out)
	}
	c.fails(2, "messages", "history", "src")
	c.fails(2, "messages", "history", "src", "h-1", "--limit", "3")
	c.fails(2, "queues", "get", "src", "--trace")
}

// skipq send --lines sends a message per line in batches, all or nothing
// each, or with --non-atomic every valid one, reporting the lines that
// failed.
func TestCLISendLines(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	in := "one\n\ntwo\r\nthree\n"
	if r := c.runIn(&in, "send", "bulk", "--lines", "--tag", "src=file"); r.code != 0 || r.stdout != "sent 3 messages to bulk\n" {
		t.Fatalf("send --lines: %+v", r)
	}
	var got struct {
		Messages []struct {
			Body string
			Tags map[string]string
		}
	}
	c.okJSON(&got, "receive", "bulk", "--max", "10", "--wait", "0", "--ack", "--json")
	if len(got.Messages) != 3 || got.Messages[1].Body != "two" || got.Messages[2].Tags["src"] != "file" {
		t.Fatalf("received %+v", got.Messages)
	}
	// A FIFO queue refuses a line without a group: all or nothing stores
	// nothing of the batch; --non-atomic stores the others.
	c.ok("queues", "create", "f", "--fifo")
	mixed := "a\nb\n"
	if r := c.runIn(&mixed, "send", "f", "--lines"); r.code != 1 || !strings.Contains(r.stderr, "none of them stored") {
		t.Fatalf("send --lines to a FIFO queue without a group: %+v", r)
	}
	r := c.runIn(&mixed, "send", "bulk", "--lines", "--non-atomic", "--json", "--delay", "99999999")
	if r.code != 1 || !strings.Contains(r.stderr, "line 1: invalid_request") || !strings.Contains(r.stderr, "2 of 2 lines failed") {
		t.Fatalf("send --lines --non-atomic with a bad delay: %+v", r)
	}
	var each struct {
		Results []struct {
			Line  int
			Error *struct{ Code string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &each); err != nil || len(each.Results) != 2 || each.Results[1].Line != 2 ||
		each.Results[1].Error == nil || each.Results[1].Error.Code != "invalid_request" {
		t.Fatalf("send --lines --non-atomic --json printed %q (%v)", r.stdout, err)
	}
	if r := c.runIn(&mixed, "send", "bulk", "--lines", "--non-atomic"); r.code != 0 || r.stdout != "sent 2 messages to bulk\n" {
		t.Fatalf("send --lines --non-atomic: %+v", r)
	}
	c.fails(2, "send", "bulk", "x", "--non-atomic")
	c.fails(2, "send", "bulk", "x", "--lines", "--id", "k")
}

// The rough edges a newcomer met: stdin's trailing newline, a receive of a
// queue that does not exist, an error said twice, a usage error followed by
// the whole command list.
func TestCLIFirstHourEdges(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	ctx := context.Background()

	in := "{\"orderId\": 7}\n"
	c.runIn(&in, "send", "orders", "-")
	c.runIn(&in, "send", "orders", "-", "--raw")
	got, err := c.client().Peek(ctx, "orders", client.PeekOptions{MaxMessages: 10})
	if err != nil || len(got) != 2 {
		t.Fatalf("peek: %v %v", got, err)
	}
	if string(got[0].Body) != "{\"orderId\": 7}" || string(got[1].Body) != in {
		t.Errorf("bodies %q and %q: want the newline dropped, then kept with --raw", got[0].Body, got[1].Body)
	}

	if r := c.run("receive", "nosuchqueue", "--wait", "0"); r.code != 0 || !strings.Contains(r.stderr, `queue "nosuchqueue" does not exist (yet)`) {
		t.Errorf("receive of a missing queue: %v", r)
	}
	if r := c.run("receive", "orders", "--wait", "0", "--peek", "--max", "10"); strings.Contains(r.stderr, "does not exist") {
		t.Errorf("receive of an existing queue: %v", r)
	}

	stderr := c.fails(1, "send", "bad queue", "x")
	if strings.Count(stderr, "must not contain") != 1 {
		t.Errorf("the error says its issue more than once: %q", stderr)
	}

	stderr = c.fails(2, "send")
	if strings.Contains(stderr, "Client commands") || !strings.Contains(stderr, "see 'skipq send -h'") {
		t.Errorf("a verb's usage error: %q, want its own line and its -h", stderr)
	}
	noScheme := &cli{t: t, url: "localhost:8080"}
	if stderr := noScheme.fails(2, "queues", "list"); !strings.Contains(stderr, "$SKIPQ_URL") {
		t.Errorf("a URL without a scheme in $SKIPQ_URL: %q, want it blamed on $SKIPQ_URL", stderr)
	}
	nobody := &cli{t: t, url: "http://127.0.0.1:1"}
	if stderr := nobody.fails(1, "queues", "list"); !strings.Contains(stderr, "is a node running there?") {
		t.Errorf("a refused connection: %q, want the hint", stderr)
	}

	if r := c.run("keys", "-h"); !strings.Contains(r.stderr, "skipq keys sqs-credentials ID") || !strings.Contains(r.stderr, "first column of 'skipq keys list'") {
		t.Errorf("keys -h: %v, want its verbs and where an id comes from", r)
	}
	noDB := &cli{t: t, url: c.url, env: []string{"SKIPQ_DATABASE_URL=", "DATABASE_URL="}}
	if stderr := noDB.fails(2, "keys", "list"); !strings.Contains(stderr, "works on the database directly") {
		t.Errorf("keys without a database URL: %q", stderr)
	}

	stderr = c.fails(2, "frobnicate")
	if strings.Contains(stderr, "Client commands") || !strings.Contains(stderr, "Run 'skipq -h' for the commands.") {
		t.Errorf("an unknown command: %q", stderr)
	}
}
