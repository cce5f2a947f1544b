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
	var out image.Output
	flag.StringVar(&out.Layout, "layout", "bin/image", "directory of the OCI image layout (replaced)")
	flag.StringVar(&out.Archive, "archive", "bin/skipq-image.tar", "docker-archive tarball (podman load, docker load)")
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

	digest, err := image.Make(context.Background(), ".", spec, out)
	if err != nil {
		return err
	}
	fmt.Printf("skipq:%s %s\nOCI layout %s, archive %s\n", spec.Version, digest, out.Layout, out.Archive)
	return nil
}
