// Command mkimage builds the node's OCI image (`make image`): a static
// skipq binary on no base image, written as an OCI layout and as a
// docker-archive tarball, and prints the image's digest. No container
// engine is needed. The same source, toolchain, flags and
// SOURCE_DATE_EPOCH give the same digest.
//
//	go run ./internal/image/mkimage -version v1.2.3 -revision $(git rev-parse HEAD)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/skipq/skipq/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run() error {
	spec := image.Spec{}
	layoutDir := flag.String("layout", "bin/image", "directory of the OCI image layout (replaced)")
	archive := flag.String("archive", "bin/skipq-image.tar", "docker-archive tarball (podman load, docker load)")
	flag.StringVar(&spec.Arch, "arch", runtime.GOARCH, "GOARCH of the image")
	flag.StringVar(&spec.Version, "version", "dev", "the image's version label and tag")
	flag.StringVar(&spec.Revision, "revision", "", "the commit the image is built from")
	flag.StringVar(&spec.Source, "source", "https://github.com/skipq/skipq", "where the source lives")
	flag.Parse()

	epoch := int64(0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var err error
		if epoch, err = strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds: %w", s, err)
		}
	}
	spec.Created = time.Unix(epoch, 0).UTC()

	work, err := os.MkdirTemp("", "skipq-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }() // a temporary directory: nothing to do if it stays
	spec.Binary = filepath.Join(work, "skipq")
	if err := image.BuildBinary(context.Background(), ".", spec.Arch, spec.Binary); err != nil {
		return err
	}
	img, err := image.Build(spec)
	if err != nil {
		return err
	}
	if err := image.WriteLayout(img, *layoutDir, spec.Version); err != nil {
		return err
	}
	if err := image.WriteArchive(img, *archive, spec.Version); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("skipq:%s %s\nOCI layout %s, archive %s\n", spec.Version, digest, *layoutDir, *archive)
	return nil
}
