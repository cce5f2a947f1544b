package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skipq/skipq/internal/node"
)

// A scenario that compares two client stacks (the sqs scenario: an AWS SDK
// against the bench's own HTTP client; the kubemq scenario: gRPC streams
// against it) runs its nodes in processes of their own: in the bench's process the heavier client's CPU and garbage would
// be taken from the node it measures, and the node's CPU could not be told
// from the clients'. The bench starts its own executable again with
// nodeProcessEnv set; that process runs one node and takes commands, one a
// line, on its standard input (nodeProcessCommand); it answers on its
// standard output, first with the node's address once it accepts requests,
// then one line per command. The end of its standard input stops it.
const nodeProcessEnv = "SKIPQ_BENCH_NODE_PROCESS"

// nodeProcessSettings travel in nodeProcessEnv as JSON.
type nodeProcessSettings struct {
	DatabaseURL string `json:"database_url"`
	IdleWaiters int    `json:"idle_waiters"`
	KubeMQAddr  string `json:"kubemq_addr,omitempty"` // the KubeMQ endpoint's address; empty: none
}

// The node process's commands and answers.
const (
	cmdStartProfile = "start-profile" // then a space and a file name: a CPU profile of the process from now on
	cmdStopProfile  = "stop-profile"  // the profile written and closed
	answerListening = "listening"     // then a space and the node's host:port
	answerOK        = "ok"
)

// ServeNodeProcess runs a node, until its standard input ends, when this
// process is one the bench started for it, and then reports true; in any
// other process it returns false at once. The bench's command and its
// tests call it before anything else.
func ServeNodeProcess() bool {
	raw, ok := os.LookupEnv(nodeProcessEnv)
	if !ok {
		return false
	}
	if err := serveNodeProcess(raw, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "skipq-bench node process: %v\n", err)
		os.Exit(1)
	}
	return true
}

func serveNodeProcess(raw string, commands io.Reader, answers io.Writer) error {
	var s nodeProcessSettings
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return fmt.Errorf("%s: %w", nodeProcessEnv, err)
	}
	cfg := benchNodeConfig(s.DatabaseURL, s.IdleWaiters)
	cfg.KubeMQ.Addr = s.KubeMQAddr
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		fmt.Fprintln(answers, answerListening, a)
	case err := <-done:
		return fmt.Errorf("node did not start: %w", err)
	}
	var profile *os.File
	lines := bufio.NewScanner(commands)
	for lines.Scan() {
		verb, arg, _ := strings.Cut(lines.Text(), " ")
		var err error
		switch verb {
		case cmdStartProfile:
			if profile, err = os.Create(arg); err == nil {
				if err = pprof.StartCPUProfile(profile); err != nil {
					profile.Close()
					profile = nil
				}
			}
		case cmdStopProfile:
			if profile != nil {
				pprof.StopCPUProfile()
				err = profile.Close()
				profile = nil
			}
		default:
			err = fmt.Errorf("unknown command %q", verb)
		}
		if err != nil {
			fmt.Fprintln(answers, err)
			continue
		}
		fmt.Fprintln(answers, answerOK)
	}
	cancel()
	return <-done
}

// nodeProcess is the bench's handle on one node process.
type nodeProcess struct {
	cmd     *exec.Cmd
	pid     string
	stdin   io.WriteCloser
	answers *bufio.Scanner
	stderr  lockedBuffer
}

// lockedBuffer holds what a node process writes to its standard error, for
// the error that reports it failing.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}

// startNodeProcesses is startNodes with each node in a process of its own
// (Options.URLs: those nodes, as startNodes does), its settings changed by
// configure. While they run, the probe counts their CPU apart from the
// bench's, and a CPU profile of a window is the first node's.
func (e *env) startNodeProcesses(ctx context.Context, configure ...func(*nodeProcessSettings)) (*nodes, error) {
	if len(e.o.URLs) > 0 {
		return e.startNodes(ctx)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: node process: %w", err)
	}
	n := &nodes{}
	n.stop = func() {
		e.nodeProcs = nil
		for _, p := range n.procs {
			p.stop()
		}
	}
	for i := 0; i < e.o.Nodes; i++ {
		s := nodeProcessSettings{DatabaseURL: e.dbURL, IdleWaiters: e.o.IdleWaiters}
		for _, f := range configure {
			f(&s)
		}
		settings, err := json.Marshal(s)
		if err != nil {
			n.stop()
			return nil, err
		}
		p, addr, err := startNodeProcess(exe, string(settings))
		if p != nil {
			n.procs = append(n.procs, p)
		}
		if err != nil {
			n.stop()
			return nil, fmt.Errorf("node process %d: %w", i, err)
		}
		n.urls = append(n.urls, "http://"+addr)
	}
	e.nodeProcs = n.procs
	return n, nil
}

// startNodeProcess starts one node process and waits for its address.
func startNodeProcess(exe, settings string) (*nodeProcess, string, error) {
	p := &nodeProcess{cmd: exec.Command(exe)}
	p.cmd.Env = append(os.Environ(), nodeProcessEnv+"="+settings)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, "", err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, "", err
	}
	p.pid = strconv.Itoa(p.cmd.Process.Pid)
	p.answers = bufio.NewScanner(stdout)
	started := make(chan string, 1)
	go func() {
		a, _ := p.answer()
		started <- a
	}()
	select {
	case a := <-started:
		if addr, ok := strings.CutPrefix(a, answerListening+" "); ok {
			return p, addr, nil
		}
		p.stop()
		return p, "", fmt.Errorf("did not start: %s", p.stderr.String())
	case <-time.After(30 * time.Second):
		p.stop()
		return p, "", errors.New("did not start in 30s")
	}
}

// answer is the process's next line of output.
func (p *nodeProcess) answer() (string, error) {
	if !p.answers.Scan() {
		return "", fmt.Errorf("node process %s ended: %s", p.pid, p.stderr.String())
	}
	return p.answers.Text(), nil
}

// command sends one command and waits for its answer.
func (p *nodeProcess) command(verb, arg string) error {
	if _, err := fmt.Fprintln(p.stdin, verb, arg); err != nil {
		return fmt.Errorf("node process %s: %w", p.pid, err)
	}
	a, err := p.answer()
	if err != nil {
		return err
	}
	if a != answerOK {
		return fmt.Errorf("node process %s: %s: %s", p.pid, verb, a)
	}
	return nil
}

// stop ends the process: its node drains as on SIGTERM, killed after 30 s.
func (p *nodeProcess) stop() {
	_ = p.stdin.Close() // the process has gone already when this fails
	exited := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
	}
}

// profileNodeProcess starts a CPU profile of the node process p into a
// temporary file; the returned stop ends it and copies the profile to w.
func profileNodeProcess(p *nodeProcess, w io.Writer) (stop func() error, err error) {
	f, err := os.CreateTemp("", "skipq-bench-node-*.pprof")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	f.Close()
	if err := p.command(cmdStartProfile, name); err != nil {
		_ = os.Remove(name)
		return nil, err
	}
	return func() error {
		defer func() { _ = os.Remove(name) }()
		if err := p.command(cmdStopProfile, ""); err != nil {
			return err
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}, nil
}
