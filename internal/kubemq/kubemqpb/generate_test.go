package kubemqpb

import (
	"os/exec"
	"testing"
)

// TestGeneratedCodeIsCurrent fails while kubemq.pb.go or kubemq_grpc.pb.go
// is not what kubemq.proto generates (`make generate` rewrites them).
func TestGeneratedCodeIsCurrent(t *testing.T) {
	out, err := exec.Command("go", "run", "./generate", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
