package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The release binary links no test code: neither Go's testing package
// (which registers its flags and pulls in the test runner) nor a test
// helper of ours (a package whose name ends in "test"). `toolpdp test`
// runs bundle tests through release packages (localserver, decisionrun,
// regorun) instead.
func TestReleaseBinaryLinksNoTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "testing" || strings.HasPrefix(p, "github.com/toolpdp/toolpdp/") && strings.HasSuffix(p, "test") {
			t.Errorf("cmd/toolpdp links %s", p)
		}
	}
}
