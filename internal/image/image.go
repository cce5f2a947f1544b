// Package image builds the node's OCI image without a container engine:
// one layer holding the static skipq binary and the passwd and group files
// that name its non-root user, on no base image, assembled with
// go-containerregistry. The same inputs (binary, labels, SOURCE_DATE_EPOCH)
// give the same digest: every time in the image is the source date, every
// owner is root, and the files are written in a fixed order.
//
// `make image` runs it through internal/image/mkimage; its test unpacks the
// result and runs the binary in it against a real database. The server
// binary does not import it.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which the Helm chart, the manifests and the
// compose file rely on.
const (
	// UID and GID of the user the node runs as: 65532, the "nonroot" of
	// distroless images, so that policies written for those fit.
	UID = 65532
	GID = 65532
	// Port is the HTTP port the node listens on by default (SKIPQ_LISTEN_ADDR=:8080).
	Port = 8080
	// BinaryPath is where the binary lives in the image, its entrypoint.
	BinaryPath = "/skipq"
)

// Spec is what an image is made of. Equal specs give equal digests.
type Spec struct {
	Binary   string    // a static linux skipq binary
	Arch     string    // GOARCH of the binary
	Version  string    // org.opencontainers.image.version and the ref name in the layout
	Revision string    // the commit, org.opencontainers.image.revision
	Source   string    // where the source lives, org.opencontainers.image.source
	Created  time.Time // SOURCE_DATE_EPOCH: the time of every file and of the image
}

// Output is where Make writes the image.
type Output struct {
	Layout  string // an OCI image layout directory (replaced whole)
	Archive string // a docker-archive tarball
}

// Make is `make image`: it builds cmd/skipq from the module at moduleDir,
// assembles the image of spec around it (spec.Binary is ignored) and
// writes it to out, returning its digest.
func Make(ctx context.Context, moduleDir string, spec Spec, out Output) (v1.Hash, error) {
	work, err := os.MkdirTemp("", "skipq-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(work) }() // a temporary directory: nothing to do if it stays
	spec.Binary = filepath.Join(work, "skipq")
	if err := buildBinary(ctx, moduleDir, spec.Arch, spec.Binary); err != nil {
		return v1.Hash{}, err
	}
	img, err := Build(spec)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := WriteLayout(img, out.Layout, spec.Version); err != nil {
		return v1.Hash{}, err
	}
	if err := WriteArchive(img, out.Archive, spec.Version); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// buildBinary builds cmd/skipq from the module at moduleDir into out, for
// linux/arch, statically (CGO_ENABLED=0: the image has no libc), without
// this machine's paths (-trimpath) or symbols (-s -w), and with an empty
// build id so that the same source and toolchain give the same bytes.
func buildBinary(ctx context.Context, moduleDir, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, "./cmd/skipq")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building skipq for linux/%s: %w\n%s", arch, err, output)
	}
	return nil
}

// Build assembles the image of spec.
func Build(spec Spec) (v1.Image, error) {
	binary, err := os.ReadFile(spec.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	rootfs, err := rootFS(binary, spec.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	created := v1.Time{Time: spec.Created.UTC()}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "skipq internal/image: " + BinaryPath + ", /etc/passwd, /etc/group"},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = spec.Arch
	cfg.OS = "linux"
	cfg.Created = created
	cfg.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"serve"},
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}},
		WorkingDir:   "/",
		Labels:       Labels(spec),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}

// Labels are the image's OCI annotations as config labels.
func Labels(spec Spec) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "skipq",
		"org.opencontainers.image.description": "skipq node: a PostgreSQL message queue's HTTP, SQS and worker service",
		"org.opencontainers.image.source":      spec.Source,
		"org.opencontainers.image.version":     spec.Version,
		"org.opencontainers.image.revision":    spec.Revision,
		"org.opencontainers.image.created":     spec.Created.UTC().Format(time.RFC3339),
	}
}

// rootFS is the layer's tar: the binary and the user database, nothing
// else (no shell, no package manager, no libc).
func rootFS(binary []byte, created time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	entries := []struct {
		name string
		mode int64
		body []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "skipq", mode: 0o755, body: binary},
		// A writable /tmp for the rare library that wants one; with a
		// read-only root file system the chart mounts an emptyDir there.
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created.UTC(), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as an OCI image layout in dir (replaced whole),
// its manifest named by version (org.opencontainers.image.ref.name).
func WriteLayout(img v1.Image, dir, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing %s: %w", dir, err)
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the layout: %w", err)
	}
	if err := path.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	})); err != nil {
		return fmt.Errorf("writing the image into the layout: %w", err)
	}
	return nil
}

// WriteArchive writes img as a docker-archive tarball (what `podman load`
// and `docker load` read) tagged skipq:version, through a temporary file so
// that a failed write leaves no half archive.
func WriteArchive(img v1.Image, path, version string) error {
	tag, err := name.NewTag("skipq:" + version)
	if err != nil {
		return fmt.Errorf("tagging the archive: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("making the archive's directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		_ = os.Remove(tmp) // the write's error is the one to report
		return fmt.Errorf("writing the archive: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return nil
}
