package image_test

// The image as a container engine would see it. Containers cannot be run
// in these sandboxes (the runtime is refused setrlimit), so the closest
// real check is this one: build the image, read it back from both of its
// outputs, check its config, unpack its root file system and run the
// binary found there against a real database.

import (
	"archive/tar"
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/skipq/skipq/internal/image"
	"github.com/skipq/skipq/internal/testdb"
)

// The image of this test run, made once as `make image` makes it (building
// the binary is the slow part), and its digest.
var (
	made   image.Output
	digest v1.Hash
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "skipq-image-test-")
	if err != nil {
		panic(err)
	}
	made = image.Output{Layout: filepath.Join(dir, "image"), Archive: filepath.Join(dir, "skipq-image.tar")}
	digest, err = image.Make(context.Background(), "../..", testSpec(), made)
	if err != nil {
		os.RemoveAll(dir)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func testSpec() image.Spec {
	return image.Spec{
		Arch:     runtime.GOARCH,
		Version:  "1.2.3-test",
		Revision: strings.Repeat("0123456789", 4),
		Source:   "https://github.com/skipq/skipq",
		Created:  time.Unix(1700000000, 0).UTC(),
	}
}

func TestImageRunsAgainstADatabase(t *testing.T) {
	spec := testSpec()
	// Both outputs hold the same image, read back as an engine reads them.
	fromLayout := readLayout(t, made.Layout, spec.Version)
	if got, err := fromLayout.Digest(); err != nil || got != digest {
		t.Fatalf("the OCI layout holds %s (%v); want %s", got, err, digest)
	}
	fromArchive, err := tarball.ImageFromPath(made.Archive, nil)
	if err != nil {
		t.Fatalf("the archive does not load: %v", err)
	}
	// A docker-archive keeps no manifest (a loader writes its own): the
	// same image there is the same config, which names every layer.
	wantConfig, err := fromLayout.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fromArchive.ConfigName(); err != nil || got != wantConfig {
		t.Fatalf("the archive holds the config %s (%v); want %s", got, err, wantConfig)
	}
	checkArchiveTag(t, made.Archive, "skipq:"+spec.Version)
	checkConfig(t, fromLayout, spec)

	rootfs := unpack(t, fromArchive)
	checkRootFS(t, rootfs)
	run(t, filepath.Join(rootfs, image.BinaryPath))
}

// TestImageIsReproducible: the binary found in the image, assembled again
// with the same spec, gives the same digest, and another date another one.
// (The binary itself is reproducible by Go's rules: -trimpath and an empty
// build id; two `make image` runs print the same digest.)
func TestImageIsReproducible(t *testing.T) {
	layoutImage := readLayout(t, made.Layout, testSpec().Version)
	spec := testSpec()
	spec.Binary = filepath.Join(unpack(t, layoutImage), image.BinaryPath)
	again, err := image.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := again.Digest(); err != nil || d != digest {
		t.Fatalf("the same spec gave %s (%v), then %s", digest, err, d)
	}
	spec.Created = spec.Created.Add(time.Second)
	later, err := image.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := later.Digest(); d == digest {
		t.Fatal("another SOURCE_DATE_EPOCH gave the same digest: the date is not in the image")
	}
}

func readLayout(t *testing.T, dir, version string) v1.Image {
	t.Helper()
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("the OCI layout does not load: %v", err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("the layout's index names %+v; want one image named %s", manifest.Manifests, version)
	}
	img, err := index.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkArchiveTag: `podman load` and `docker load` name the image from
// manifest.json's RepoTags.
func checkArchiveTag(t *testing.T, archive, tag string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("the archive has no manifest.json: %v", err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var manifest []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
			t.Fatal(err)
		}
		if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{tag}) {
			t.Fatalf("the archive's manifest.json is %+v; want one image tagged %s", manifest, tag)
		}
		return
	}
}

func checkConfig(t *testing.T, img v1.Image, spec image.Spec) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q; want 65532:65532 (non-root)", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/skipq"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q, cmd %q; want [/skipq] and [serve]", c.Entrypoint, c.Cmd)
	}
	if len(c.ExposedPorts) != 1 || c.ExposedPorts["8080/tcp"] != struct{}{} {
		t.Errorf("exposed ports %v; want 8080/tcp only", c.ExposedPorts)
	}
	for key, value := range map[string]string{
		"org.opencontainers.image.source":   spec.Source,
		"org.opencontainers.image.version":  spec.Version,
		"org.opencontainers.image.revision": spec.Revision,
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	} {
		if c.Labels[key] != value {
			t.Errorf("label %s is %q; want %q", key, c.Labels[key], value)
		}
	}
	if cfg.OS != "linux" || cfg.Architecture != spec.Arch || !cfg.Created.Equal(spec.Created) {
		t.Errorf("platform %s/%s created %v; want linux/%s created %v", cfg.OS, cfg.Architecture, cfg.Created, spec.Arch, spec.Created)
	}
	if mt, err := img.MediaType(); err != nil || mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %q (%v); want an OCI manifest", mt, err)
	}
}

// unpack writes the image's root file system into a directory, as an
// engine would (mutate.Extract flattens the layers).
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s is owned by %d:%d and dated %v; want root and SOURCE_DATE_EPOCH", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, h.FileInfo().Mode()); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_EXCL, os.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		default:
			t.Fatalf("%s is of tar type %c; the image holds only files and directories", h.Name, h.Typeflag)
		}
	}
}

// checkRootFS: the binary and the user database, and nothing to run
// besides the binary (no shell, no package manager, no libc).
func checkRootFS(t *testing.T, dir string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, "/"+rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/etc/group", "/etc/passwd", "/skipq"}; !slices.Equal(files, want) {
		t.Fatalf("the image holds %v; want only %v (no shell, no package manager)", files, want)
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Fatalf("/etc/passwd does not name user 65532: %q %v", passwd, err)
	}
	bin, err := elf.Open(filepath.Join(dir, "skipq"))
	if err != nil {
		t.Fatalf("/skipq is not an ELF binary: %v", err)
	}
	defer bin.Close()
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatal("/skipq is dynamically linked; the image has no libc for it")
		}
	}
	if info, err := os.Stat(filepath.Join(dir, "tmp")); err != nil || info.Mode().Perm() != 0o777 || info.Mode()&os.ModeSticky == 0 {
		t.Fatalf("/tmp is %v (%v); want a sticky, world-writable directory", info.Mode(), err)
	}
}

// run runs the unpacked binary as the image's default command would (serve),
// after the chart's migration Job's command, and waits for /readyz 200.
func run(t *testing.T, bin string) {
	t.Helper()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	migrate := exec.CommandContext(ctx, bin, "migrate", "up")
	migrate.Env = append(os.Environ(), "SKIPQ_DATABASE_URL="+db)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("skipq migrate up: %v\n%s", err, out)
	}

	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = append(os.Environ(), "SKIPQ_DATABASE_URL="+db, "SKIPQ_LISTEN_ADDR=127.0.0.1:0", "SKIPQ_AUTH=off", "SKIPQ_MIGRATE=false")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addr <- line.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-ctx.Done():
		t.Fatal("the unpacked skipq serve did not start listening")
	}
	for {
		status, err := get(ctx, base+"/readyz")
		if status == http.StatusOK {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz of the unpacked binary answered %d (%v); want 200", status, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
