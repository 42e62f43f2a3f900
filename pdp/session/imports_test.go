package session

import (
	"os/exec"
	"strings"
	"testing"
)

// The state store sits below the policy: it takes decisions as the
// contract's values (pb.Decision), and imports nothing of ours but the
// contract, so that a store can be built and tested without a policy.
func TestSessionImportsOnlyTheContract(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/toolpdp/toolpdp/") && p != "github.com/toolpdp/toolpdp/pdp/session" && p != "github.com/toolpdp/toolpdp/proto/toolpdp/v1" {
			t.Errorf("pdp/session imports %s", p)
		}
	}
}
