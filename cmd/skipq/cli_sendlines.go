package main

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/skipq/skipq/client"
	"github.com/skipq/skipq/wire"
)

// linesBatchBytes bounds the bodies of one batch request of send --lines,
// well inside the service's default request limit (16 MiB) after JSON
// escaping.
const linesBatchBytes = 4 << 20

// sendLinesJSON is what send --lines prints with --json: one entry per
// message, in line order, each with its line number.
type sendLinesJSON struct {
	Queue   string          `json:"queue"`
	Results []sendLineEntry `json:"results"`
}

type sendLineEntry struct {
	Line int `json:"line"`
	wire.SendEachEntry
}

// sendLines sends each non-empty line of m.Body as a message with m's other
// fields, in batches of up to client.MaxBatch messages: SendBatch (each
// batch all or nothing; the first failure stops) or, nonAtomic, SendEach
// (every valid message stored, each failed line reported on stderr, exit
// status 1 if any failed).
func sendLines(ctx context.Context, c *client.Client, o *cliOptions, queue string, m client.Message, nonAtomic bool) error {
	var msgs []client.Message
	var lineOf []int
	for i, line := range bytes.Split(m.Body, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		one := m
		one.Body = line
		msgs, lineOf = append(msgs, one), append(lineOf, i+1)
	}
	if len(msgs) == 0 {
		return usageErr("send", "--lines found no non-empty line")
	}
	out := sendLinesJSON{Queue: queue}
	sent, dups, failed := 0, 0, 0
	for start := 0; start < len(msgs); {
		end, size := start, 0
		for end < len(msgs) && end-start < client.MaxBatch && (end == start || size+len(msgs[end].Body) <= linesBatchBytes) {
			size += len(msgs[end].Body)
			end++
		}
		var entries []client.BatchEntry
		if nonAtomic {
			var err error
			if entries, err = c.SendEach(ctx, queue, msgs[start:end]); err != nil {
				return fmt.Errorf("lines %d–%d (%d sent before): %w", lineOf[start], lineOf[end-1], sent, apiError(err))
			}
		} else {
			res, err := c.SendBatch(ctx, queue, msgs[start:end])
			if err != nil {
				return fmt.Errorf("lines %d–%d, none of them stored (%d sent before): %w", lineOf[start], lineOf[end-1], sent, apiError(err))
			}
			for i := range res {
				entries = append(entries, client.BatchEntry{Result: &res[i]})
			}
		}
		for i, e := range entries {
			line := lineOf[start+i]
			entry := sendLineEntry{Line: line}
			switch {
			case e.Err != nil:
				failed++
				fmt.Fprintf(os.Stderr, "line %d: %v\n", line, apiError(e.Err))
				entry.Error = &wire.EntryError{Code: e.Err.Code, Message: e.Err.Message, Issues: e.Err.Issues}
			case e.Result.Duplicate:
				dups++
			default:
				sent++
			}
			entry.SendResult = e.Result
			out.Results = append(out.Results, entry)
		}
		start = end
	}
	if o.json {
		if err := writeJSON(os.Stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Printf("sent %d %s to %s", sent, plural(int64(sent), "message"), queue)
		if dups > 0 {
			fmt.Printf(" (%d %s)", dups, plural(int64(dups), "duplicate"))
		}
		fmt.Println()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d lines failed", failed, len(msgs))
	}
	return nil
}
