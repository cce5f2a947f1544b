package main

// Shared plumbing of the client verbs (queues, send, receive, ack, nack, dlq,
// tail): the connection flags, flag types for optional values, error
// messages, and output helpers. Every HTTP call goes through package client.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/skipq/skipq/client"
	"github.com/skipq/skipq/wire"
)

// defaultURL is where the client verbs go when neither --url nor $SKIPQ_URL
// says otherwise (where `make run` serves).
const defaultURL = "http://127.0.0.1:8080"

// cliOptions are the flags every client verb has.
type cliOptions struct {
	url    string
	apiKey string
	json   bool
}

// cliFlags returns a verb's flag set with --url, --api-key and --json.
func cliFlags(name string) (*flag.FlagSet, *cliOptions) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o := &cliOptions{}
	url := os.Getenv("SKIPQ_URL")
	if url == "" {
		url = defaultURL
	}
	fs.StringVar(&o.url, "url", url, "the service's base URL ($SKIPQ_URL)")
	fs.StringVar(&o.apiKey, "api-key", os.Getenv("SKIPQ_API_KEY"), "API key ($SKIPQ_API_KEY)")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	return fs, o
}

// cliParse parses a verb's arguments (flags before or after positional
// ones). On -h it prints the verb's usage line, then its flags.
func cliParse(fs *flag.FlagSet, args []string, usage string) ([]string, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprintf(os.Stderr, "Usage: %s\n\nFlags:\n", usage)
			break
		}
	}
	return parseInterspersed(fs, args)
}

// usageErr is a usage error (exit 2) of a verb, pointing at its help.
func usageErr(verb, format string, args ...any) error {
	return fmt.Errorf("%w: %s (see 'skipq %s -h')", errUsage, fmt.Sprintf(format, args...), verb)
}

// commonFlags are the flags cliFlags gives every verb.
var commonFlags = map[string]bool{"url": true, "api-key": true, "json": true}

func (o *cliOptions) client() (*client.Client, error) {
	c, err := client.New(o.url, client.WithAPIKey(o.apiKey))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", errUsage, o.urlSource(), strings.TrimPrefix(err.Error(), "skipq: "))
	}
	return c, nil
}

// urlSource names where the URL came from, for an error about it.
func (o *cliOptions) urlSource() string {
	if env := os.Getenv("SKIPQ_URL"); env != "" && env == o.url {
		return "$SKIPQ_URL"
	}
	return "--url"
}

// apiError turns what the client returned into the message main prints
// after "skipq: ": the server's code and message ("not_found: queue \"x\"
// does not exist"), with the issues of a 400 and, for server failures, the
// request id to look for in the server's log.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	var e *client.Error
	if !errors.As(err, &e) {
		msg := strings.TrimPrefix(err.Error(), "skipq: ")
		if errors.Is(err, syscall.ECONNREFUSED) {
			// The most likely cause on a first try: nothing serves there.
			msg += " (is a node running there? `make run` starts one at " + defaultURL + ")"
		}
		return errors.New(msg)
	}
	var b strings.Builder
	if e.Code != "" {
		b.WriteString(e.Code)
	} else {
		fmt.Fprintf(&b, "HTTP %d", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	// The issues the message does not already say (a 400's message is
	// often its one issue).
	var more []string
	for _, is := range e.Issues {
		text := is.Message
		if is.Path != "" {
			text = is.Path + ": " + is.Message
		}
		if !strings.Contains(e.Message, text) {
			more = append(more, text)
		}
	}
	if len(more) > 0 {
		b.WriteString(" (" + strings.Join(more, "; ") + ")")
	}
	if e.Status >= 500 && e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return errors.New(b.String())
}

// secondsFlag is an optional number of seconds: "30", or a Go duration of
// whole seconds ("30s", "5m", "1h30m"). v is nil when the flag was not given.
type secondsFlag struct{ v *int }

func (f *secondsFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f *secondsFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil {
			return errors.New("want seconds (30) or a duration (30s, 5m)")
		}
		if d%time.Second != 0 {
			return errors.New("want whole seconds")
		}
		n = int(d / time.Second)
	}
	if n < 0 {
		return errors.New("must not be negative")
	}
	f.v = &n
	return nil
}

// intFlag is an optional integer; v is nil when the flag was not given.
type intFlag struct{ v *int }

func (f *intFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f *intFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number")
	}
	if n < 0 {
		return errors.New("must not be negative")
	}
	f.v = &n
	return nil
}

// stringFlag is an optional string; v is nil when the flag was not given
// (so that --dlq "" can mean "discard" while no --dlq means "the default").
type stringFlag struct{ v *string }

func (f *stringFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return *f.v
}

func (f *stringFlag) Set(s string) error {
	f.v = &s
	return nil
}

// boolFlag is an optional boolean: --name is true, --name=false false; v
// is nil when the flag was not given (so that an update keeps the value).
type boolFlag struct{ v *bool }

func (f *boolFlag) IsBoolFlag() bool { return true }

func (f *boolFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.FormatBool(*f.v)
}

func (f *boolFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	f.v = &b
	return nil
}

// tagsFlag collects repeated --tag k=v.
type tagsFlag map[string]string

func (f tagsFlag) String() string {
	parts := make([]string, 0, len(f))
	for k, v := range f {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (f tagsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	f[k] = v
	return nil
}

// writeJSON writes v as indented JSON (HTML characters unescaped).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// humanTime is a timestamp in a table: UTC, to the second; "-" for none.
func humanTime(t *wire.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// messageJSON is a message as the verbs print it with --json: the HTTP
// API's message object (docs/API.md), body as sent (text, or base64 with
// bodyEncoding "base64").
type messageJSON = wire.Message

// bodyPreview is a body in a table: one line, at most 60 characters; binary
// bodies as base64 with a "base64:" prefix.
func bodyPreview(body []byte, binary bool) string {
	s := string(body)
	if binary {
		s = "base64:" + base64.StdEncoding.EncodeToString(body)
	} else {
		s = escapeControl(s)
	}
	const max = 60
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

// escapeControl writes control characters as Go escapes (\n, \t, \x1b),
// so that a body stays on its line.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !isControl(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r) // '\n', '\x1b'
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

// tagsPreview is a message's tags in a table: k=v,k=v (sorted), or "-".
func tagsPreview(tags map[string]string) string {
	if len(tags) == 0 {
		return "-"
	}
	return escapeControl(tagsFlag(tags).String())
}
