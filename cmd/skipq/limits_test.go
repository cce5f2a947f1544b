package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/testdb"
)

// longPolls is how many concurrent long-polls TestManyLongPolls parks;
// SKIPQ_TEST_LONGPOLLS raises it (make chaos uses 10,000).
func longPolls() int {
	if n, err := strconv.Atoi(os.Getenv("SKIPQ_TEST_LONGPOLLS")); err == nil && n > 0 {
		return n
	}
	return 2000
}

// Thousands of concurrent long-polls park on one node without holding
// database connections; the node keeps answering, and a send wakes one.
func TestManyLongPolls(t *testing.T) {
	db := testdb.New(t)
	n := longPolls()
	// The default SKIPQ_MAX_WAITERS is sized for the memory target of docs/PERFORMANCE.md,
	// below what this test (and make chaos, 10,000) parks.
	p := serve(t, db, "SKIPQ_DB_MAX_CONNS=8", "SKIPQ_MAX_WAITERS="+strconv.Itoa(n))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true}}
	got := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+p.addr+"/v1/queues/many/messages/receive",
				strings.NewReader(`{"waitSeconds": 60}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return // cancelled at the end
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"body":"wake"`) {
				got <- i
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for waiters(t, p) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d long-polls parked", waiters(t, p), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// No long-poll holds a database connection: the node's own pool gauge
	// drops to 0 acquired connections (the worker and the hub's rechecks
	// take one now and then, so the least of a few samples). Holding one
	// each, 2,000 long-polls would keep all 8 acquired.
	least := 8
	for range 20 {
		least = min(least, acquiredConns(t, p))
		if least == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if least != 0 {
		t.Fatalf("%d long-polls: at least %d of the pool's 8 connections acquired in every sample", n, least)
	}
	if status, err := p.get("/healthz"); err != nil || status != http.StatusOK {
		t.Fatalf("healthz under %d long-polls: %d %v", n, status, err)
	}
	resp, err := http.Post("http://"+p.addr+"/v1/queues/many/messages", "application/json", strings.NewReader(`{"body":"wake"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("send: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no parked receive got the message")
	}
	cancel()
	wg.Wait()
	if len(got) != 0 {
		t.Fatalf("%d more receives got the one message", len(got))
	}
}

var acquiredLine = regexp.MustCompile(`(?m)^skipq_db_pool_connections\{state="acquired"\} (\d+)`)

// acquiredConns reads the node's pool gauge of connections in use.
func acquiredConns(t *testing.T, p *process) int {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := acquiredLine.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no acquired-connections gauge in /metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func waiters(t *testing.T, p *process) int {
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := waitersLine.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// A client that sends its request too slowly is cut off; oversized headers
// are refused.
func TestSlowAndOversizedRequests(t *testing.T) {
	p := serve(t, testdb.New(t), "SKIPQ_HTTP_READ_TIMEOUT=2")
	for name, partial := range map[string]string{
		"slow headers": "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\n",
		"slow body":    "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"body\":",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", p.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, partial); err != nil {
				t.Fatal(err)
			}
			// Never finish the request: the server must close the connection.
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err = io.ReadAll(c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the server kept a stalled request open for 20 s")
			}
		})
	}
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 200<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("200 KiB of headers: %d, want 431", resp.StatusCode)
	}
	// net/http refuses it before any handler runs; the answer is still the
	// The error envelope (docs/API.md#errors).
	id := resp.Header.Get("X-Request-Id")
	if id == "" || !strings.Contains(string(body), `"code":"request_header_fields_too_large"`) ||
		!strings.Contains(string(body), `"requestId":"`+id+`"`) {
		t.Fatalf("200 KiB of headers: X-Request-Id %q, body %s: not the error envelope", id, body)
	}
}
