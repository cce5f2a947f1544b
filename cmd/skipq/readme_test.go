package main

// The README as a test: its code blocks run in order, as a reader would
// run them after `make run`, against a node of this binary on a fresh
// database, and each command's output must still match what the README
// shows under it.
//
// How the README is read:
//   - A ```sh block is a list of commands (a line ending in `\` continues
//     on the next). Each runs in one bash session that lives for the whole
//     README, so `export` and shell variables carry over, with stdin from
//     /dev/null and stdout and stderr together, as on a terminal.
//   - `#> ` lines right under a command are its output, line for line; `…`
//     stands for any text within a line, and a line of only `…` for any
//     number of lines. A command with no `#>` lines only has to succeed.
//   - A ```sql block runs with psql (ON_ERROR_STOP) on the node's database,
//     a ```python block with python3, both in the same shell session.
//   - A ```go block is a program: it must compile (as package main of this
//     module). It is not run, so it needs a not-run marker that says why.
//   - Every other block, or one the reader is not meant to run here, has
//     `<!-- README test: not run: REASON -->` on the line before it.
//   - PASTE-THE-… in a command is what the README tells the reader to
//     paste from an earlier output or from what `make run` printed; the
//     test pastes the same (placeholders below) and nothing else.
//
// The README's commands reach `make run`'s address, 127.0.0.1:8080 (or
// localhost:8080). The node here listens on a free port instead, so the
// session's SKIPQ_URL names it (the CLI's documented override) and curl,
// the AWS CLI and boto3 reach it as their HTTP proxy (http_proxy), which
// forwards each request unchanged, Host header included. A tool that is
// not installed (curl, aws, python3 with boto3, psql, openssl) is reported
// and its commands are not run.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/testdb"
)

// readmeBlock is one fenced code block of the README.
type readmeBlock struct {
	line   int    // of the opening fence, 1-based
	lang   string // the fence's info string
	notRun string // the reason given in a not-run marker, or ""
	lines  []string
}

var notRunRE = regexp.MustCompile(`^<!-- README test: not run: (.+) -->$`)

// parseReadme returns the README's fenced blocks in order.
func parseReadme(t *testing.T, text string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	var cur *readmeBlock
	prev := ""
	for i, line := range strings.Split(text, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{line: i + 1, lang: strings.TrimPrefix(line, "```")}
			if m := notRunRE.FindStringSubmatch(prev); m != nil {
				cur.notRun = m[1]
			}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		case strings.HasPrefix(line, "<!-- README test") && notRunRE.FindStringSubmatch(line) == nil:
			t.Errorf("README:%d: a marker the test does not understand: %s", i+1, line)
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	if cur != nil {
		t.Fatalf("README:%d: the block never ends", cur.line)
	}
	return blocks
}

// readmeCommand is one command of a sh block and the output the README
// shows under it.
type readmeCommand struct {
	line   int
	text   string
	output []string // the `#> ` lines; nil when the README shows none
}

// commands splits a sh block into its commands.
func (b readmeBlock) commands() []readmeCommand {
	var cmds []readmeCommand
	for i := 0; i < len(b.lines); i++ {
		line := b.lines[i]
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "#>"):
			out := strings.TrimPrefix(strings.TrimPrefix(trimmed, "#>"), " ")
			if len(cmds) > 0 {
				last := &cmds[len(cmds)-1]
				last.output = append(last.output, out)
			}
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		}
		c := readmeCommand{line: b.line + 1 + i, text: line}
		for strings.HasSuffix(line, `\`) && i+1 < len(b.lines) {
			i++
			line = b.lines[i]
			c.text += "\n" + line
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// pythonOutput returns the `#> ` lines of a python block: what it prints.
func (b readmeBlock) pythonOutput() []string {
	var out []string
	for _, line := range b.lines {
		if text, ok := strings.CutPrefix(line, "#>"); ok {
			out = append(out, strings.TrimPrefix(text, " "))
		}
	}
	return out
}

// A placeholder the README asks the reader to fill in, and where the
// reader finds the value.
type placeholder struct {
	name string
	// from is matched against each command's output; its first group is
	// the value, the latest match wins.
	from *regexp.Regexp
}

var placeholders = []placeholder{
	{"PASTE-THE-HANDLE", regexp.MustCompile(`"receiptHandle":\s*"([^"]+)"`)},
	{"PASTE-THE-KEY-ID", regexp.MustCompile(`"id":\s*(\d+)`)},
}

// databaseURLPlaceholder is the database URL that `make run` prints.
const databaseURLPlaceholder = "PASTE-THE-DATABASE-URL"

// shell is the bash session the README's commands run in.
type shell struct {
	cmd    *exec.Cmd
	stdin  *bufio.Writer
	status *bufio.Reader
	dir    string
	n      int
}

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{statusW} // fd 3: each command's exit status
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	statusW.Close()
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		statusR.Close()
	})
	return &shell{cmd: cmd, stdin: bufio.NewWriter(in), status: bufio.NewReader(statusR), dir: dir}
}

// run runs one command to its end and returns its exit status and what it
// printed.
func (s *shell) run(t *testing.T, command string, timeout time.Duration) (int, string) {
	t.Helper()
	s.n++
	out := filepath.Join(s.dir, fmt.Sprintf("out.%d", s.n))
	fmt.Fprintf(s.stdin, "{\n%s\n} </dev/null >%q 2>&1; echo $? >&3\n", command, out)
	if err := s.stdin.Flush(); err != nil {
		t.Fatalf("the shell is gone: %v", err)
	}
	type answer struct {
		line string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		line, err := s.status.ReadString('\n')
		done <- answer{line, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("the shell is gone: %v", a.err)
		}
		code, err := strconv.Atoi(strings.TrimSpace(a.line))
		if err != nil {
			t.Fatalf("the shell answered %q", a.line)
		}
		printed, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return code, string(printed)
	case <-time.After(timeout):
		printed, _ := os.ReadFile(out)
		t.Fatalf("still running after %v:\n%s\nprinted so far:\n%s", timeout, command, printed)
		return 0, ""
	}
}

// outputMatches reports whether printed is what the README shows.
func outputMatches(want []string, printed string) bool {
	got := strings.Split(strings.TrimSuffix(printed, "\n"), "\n")
	if printed == "" {
		got = nil
	}
	var re strings.Builder
	re.WriteString(`^`)
	for _, w := range want {
		if strings.TrimSpace(w) == "…" {
			re.WriteString(`(?:[^\n]*\n)*?`)
			continue
		}
		parts := strings.Split(w, "…")
		for i, p := range parts {
			if i > 0 {
				re.WriteString(`[^\n]*?`)
			}
			re.WriteString(regexp.QuoteMeta(p))
		}
		re.WriteString(`\n`)
	}
	re.WriteString(`$`)
	text := strings.Join(got, "\n")
	if len(got) > 0 {
		text += "\n"
	}
	return regexp.MustCompile(re.String()).MatchString(text)
}

// tools are the programs the README's commands use besides bash and the
// skipq binary; a command naming a missing one is reported and not run.
var tools = []string{"curl", "aws", "psql", "python3", "openssl"}

var wordRE = regexp.MustCompile(`[A-Za-z0-9_.-]+`)

func TestReadme(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("not run: the README's commands need bash")
	}
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := parseReadme(t, string(text))

	missing := map[string]string{}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing[tool] = tool + " is not installed"
		}
	}
	if missing["python3"] == "" {
		if reason := boto3TooOld(); reason != "" {
			missing["python3"] = reason
		}
	}
	if missing["aws"] == "" {
		if reason := awsCLITooOld(); reason != "" {
			missing["aws"] = reason
		}
	}

	db := testdb.New(t)
	dropReadmeRoles(t, db, blocks)
	t.Cleanup(func() { dropReadmeRoles(t, db, blocks) })
	p := serve(t, db)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary, filepath.Join(dir, "bin", "skipq")); err != nil {
		t.Fatal(err)
	}
	sh := startShell(t, dir, readmeEnv(dir, "http://"+p.addr))

	pasted := map[string]string{databaseURLPlaceholder: db}
	var skipped []string // commands not run for a missing tool
	start := time.Now()
	// The Go programs compile while the commands run.
	compiled := make(chan error, 1)
	go func() { compiled <- compileGoBlocks(t.TempDir(), blocks) }()
	for _, b := range blocks {
		if b.notRun != "" {
			t.Logf("README:%d: not run: %s", b.line, b.notRun)
			continue
		}
		switch b.lang {
		case "sh":
			for _, c := range b.commands() {
				skipped = runReadmeCommand(t, sh, c, missing, pasted, skipped)
			}
		case "sql":
			file := filepath.Join(dir, fmt.Sprintf("block-%d.sql", b.line))
			writeFile(t, file, strings.Join(b.lines, "\n")+"\n")
			c := readmeCommand{line: b.line, text: fmt.Sprintf("psql -X -q -v ON_ERROR_STOP=1 %q -f %q", db, file)}
			skipped = runReadmeCommand(t, sh, c, missing, pasted, skipped)
		case "python":
			file := filepath.Join(dir, fmt.Sprintf("block-%d.py", b.line))
			writeFile(t, file, strings.Join(b.lines, "\n")+"\n")
			c := readmeCommand{line: b.line, text: fmt.Sprintf("python3 %q", file), output: b.pythonOutput()}
			skipped = runReadmeCommand(t, sh, c, missing, pasted, skipped)
		default:
			t.Errorf("README:%d: a ```%s block is neither run nor marked `<!-- README test: not run: REASON -->`", b.line, b.lang)
		}
	}
	if err := <-compiled; err != nil {
		t.Fatal(err)
	}
	t.Logf("the README ran in %v", time.Since(start).Round(time.Millisecond))
	if len(skipped) > 0 {
		// The CI image has every tool; elsewhere the rest of the README
		// ran and passed, and the test says what it could not run.
		if os.Getenv("CI") == "true" {
			t.Fatalf("%d README commands were not run:\n%s", len(skipped), strings.Join(skipped, "\n"))
		}
		t.Skipf("the README passed but for %d commands that were not run:\n%s", len(skipped), strings.Join(skipped, "\n"))
	}
}

// runReadmeCommand runs one command of the README and holds it to what the
// README shows. A command that needs a missing tool is not run: it is
// added to skipped, which is returned.
func runReadmeCommand(t *testing.T, sh *shell, c readmeCommand, missing, pasted map[string]string, skipped []string) []string {
	t.Helper()
	for _, w := range wordRE.FindAllString(c.text, -1) {
		if reason := missing[w]; reason != "" {
			msg := fmt.Sprintf("README:%d: not run: %s: %s", c.line, reason, firstLine(c.text))
			t.Log(msg)
			return append(skipped, msg)
		}
	}
	command := c.text
	for _, name := range append([]string{databaseURLPlaceholder}, placeholderNames()...) {
		if !strings.Contains(command, name) {
			continue
		}
		value, ok := pasted[name]
		if !ok {
			t.Fatalf("README:%d: %s, but no earlier output showed it: %s", c.line, name, firstLine(c.text))
		}
		command = strings.ReplaceAll(command, name, value)
	}
	if strings.Contains(command, "PASTE-THE-") {
		t.Fatalf("README:%d: a placeholder the test does not know: %s", c.line, command)
	}
	began := time.Now()
	code, printed := sh.run(t, command, 30*time.Second)
	if code == 127 { // bash: command not found
		t.Fatalf("README:%d: a program this command runs is not installed:\n%s\nprinted:\n%s\n"+
			"Name it in tools (readme_test.go) so that it is reported, not run, where it is missing, or mark the block not run.",
			c.line, c.text, printed)
	}
	if code != 0 {
		t.Fatalf("README:%d: exit status %d:\n%s\nprinted:\n%s", c.line, code, c.text, printed)
	}
	if c.output != nil && !outputMatches(c.output, printed) {
		t.Fatalf("README:%d: the output is not what the README shows:\n%s\nthe README shows:\n%s\nprinted:\n%s",
			c.line, c.text, strings.Join(c.output, "\n"), printed)
	}
	if testing.Verbose() {
		t.Logf("README:%d (%v): %s\n%s", c.line, time.Since(began).Round(time.Millisecond), firstLine(c.text), printed)
	}
	for _, ph := range placeholders {
		if m := ph.from.FindAllStringSubmatch(printed, -1); m != nil {
			pasted[ph.name] = m[len(m)-1][1]
		}
	}
	return skipped
}

// compileGoBlocks builds each ```go block of the README as a main package
// of this module, through an overlay: nothing is written into the source
// tree. It returns the first failure.
func compileGoBlocks(dir string, blocks []readmeBlock) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		source := filepath.Join(dir, fmt.Sprintf("block-%d.go", b.line))
		if err := os.WriteFile(source, []byte(strings.Join(b.lines, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		pkg := fmt.Sprintf("internal/readmeexample%d", b.line)
		overlay, err := json.Marshal(map[string]map[string]string{
			"Replace": {filepath.Join(root, pkg, "main.go"): source},
		})
		if err != nil {
			return err
		}
		overlayFile := filepath.Join(dir, fmt.Sprintf("overlay-%d.json", b.line))
		if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
			return err
		}
		build := exec.Command("go", "build", "-overlay", overlayFile, "-o", os.DevNull, "./"+pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("README:%d: the Go program does not compile: %w\n%s", b.line, err, out)
		}
	}
	return nil
}

var createRoleRE = regexp.MustCompile(`(?i)CREATE ROLE (\w+)`)

// dropReadmeRoles drops the roles the README's SQL creates. Roles belong
// to the whole cluster, not to the test's database, and the README's
// reader starts on a cluster that has none of them.
func dropReadmeRoles(t *testing.T, db string, blocks []readmeBlock) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, b := range blocks {
		if b.lang != "sql" || b.notRun != "" {
			continue
		}
		for _, m := range createRoleRE.FindAllStringSubmatch(strings.Join(b.lines, "\n"), -1) {
			if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{m[1]}.Sanitize()); err != nil {
				t.Fatalf("dropping the README's role %s: %v", m[1], err)
			}
		}
	}
}

func placeholderNames() []string {
	names := make([]string, len(placeholders))
	for i, ph := range placeholders {
		names[i] = ph.name
	}
	return names
}

// readmeEnv is the environment of the README's shell: this process's,
// without anything that would point a tool elsewhere (SKIPQ_*, AWS_*,
// proxies, database URLs, the user's curl and AWS configuration), and with
// the node standing in for 127.0.0.1:8080.
func readmeEnv(dir, nodeURL string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if strings.HasPrefix(upper, "SKIPQ_") || strings.HasPrefix(upper, "AWS_") ||
			strings.HasSuffix(upper, "_PROXY") || upper == "DATABASE_URL" || strings.HasPrefix(upper, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"SKIPQ_URL="+nodeURL,
		"http_proxy="+nodeURL, "HTTP_PROXY="+nodeURL,
		"CURL_HOME="+dir, // no ~/.curlrc
		"AWS_CONFIG_FILE="+filepath.Join(dir, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "aws-credentials"),
		"AWS_PAGER=",                     // AWS CLI v2 would page its output through less
		"AWS_EC2_METADATA_DISABLED=true", // no instance metadata lookups
	)
}

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// The first versions that speak SQS's JSON protocol (README, "Use it from
// SQS code"); older ones speak only the query protocol, which skipq
// answers with an error.
var (
	leastAWSCLIv1 = [3]int{1, 32, 90} // with botocore 1.34.90
	leastAWSCLIv2 = [3]int{2, 13, 34}
	leastBoto3    = [3]int{1, 34, 90}
)

// awsCLITooOld says why the installed AWS CLI cannot be used, or "".
func awsCLITooOld() string {
	out, err := exec.Command("aws", "--version").CombinedOutput()
	if err != nil {
		return "aws --version failed: " + strings.TrimSpace(string(out))
	}
	version := strings.TrimPrefix(strings.Fields(string(out) + " ")[0], "aws-cli/")
	least := leastAWSCLIv1
	if strings.HasPrefix(version, "2.") {
		least = leastAWSCLIv2
	}
	return tooOld("the AWS CLI", version, least)
}

// boto3TooOld says why python3's boto3 cannot be used, or "".
func boto3TooOld() string {
	out, err := exec.Command("python3", "-c", "import boto3; print(boto3.__version__)").CombinedOutput()
	if err != nil {
		return "python3 cannot import boto3: " + strings.TrimSpace(string(out))
	}
	return tooOld("boto3", strings.TrimSpace(string(out)), leastBoto3)
}

func tooOld(tool, version string, least [3]int) string {
	m := versionRE.FindStringSubmatch(version)
	if m == nil {
		return fmt.Sprintf("%s has no version I can read (%q)", tool, version)
	}
	for i := range least {
		v, _ := strconv.Atoi(m[i+1])
		if v != least[i] {
			if v < least[i] {
				return fmt.Sprintf("%s %s speaks only SQS's query protocol", tool, version)
			}
			break
		}
	}
	return ""
}

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
