// Command generate writes kubemqpb's Go code from kubemq.proto without a
// protoc binary: protocompile (pure Go) parses the file, and the two code
// generators pinned as Go tools in go.mod (protoc-gen-go,
// protoc-gen-go-grpc) are run as protoc would run them, a
// CodeGeneratorRequest on stdin. Run from the kubemqpb directory
// (`make generate`); with -check it writes nothing and fails when a
// committed file differs from what it would write.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

const protoFile = "kubemq.proto"

// plugins are the generators, each run as `go tool NAME`.
var plugins = []string{"protoc-gen-go", "protoc-gen-go-grpc"}

func main() {
	check := flag.Bool("check", false, "compare with the committed files instead of writing them")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	compiler := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{"."}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := compiler.Compile(context.Background(), protoFile)
	if err != nil {
		return err
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{protoFile},
		Parameter:      proto.String("paths=source_relative"),
		ProtoFile:      []*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(files[0])},
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	var stale []string
	for _, plugin := range plugins {
		out, err := runPlugin(plugin, in)
		if err != nil {
			return err
		}
		for _, f := range out {
			if !check {
				if err := os.WriteFile(f.GetName(), []byte(f.GetContent()), 0o644); err != nil {
					return err
				}
				continue
			}
			if have, err := os.ReadFile(f.GetName()); err != nil || !bytes.Equal(have, []byte(f.GetContent())) {
				stale = append(stale, f.GetName())
			}
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("%v differ from %s: run `make generate` and commit the result", stale, protoFile)
	}
	return nil
}

func runPlugin(plugin string, in []byte) ([]*pluginpb.CodeGeneratorResponse_File, error) {
	cmd := exec.Command("go", "tool", plugin)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", plugin, err, stderr.String())
	}
	var res pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("%s: %w", plugin, err)
	}
	if res.Error != nil {
		return nil, errors.New(plugin + ": " + res.GetError())
	}
	return res.GetFile(), nil
}
