package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

// TestMain gives every server these tests start — the built binary or serve
// run in process — a generous --eval-timeout through its environment
// variable, so a starved machine cannot turn an allow into a fail-closed
// deny. A flag a test passes still wins over the variable, and a test that
// sets the variable itself (t.Setenv) replaces it for its own run. The
// binary the process tests share (built once) is removed at the end.
func TestMain(m *testing.M) {
	if os.Getenv(EnvName("eval-timeout")) == "" {
		os.Setenv(EnvName("eval-timeout"), testkit.EvalTimeout.String())
	}
	code := m.Run()
	if buildErr == nil && binPath != "" {
		os.RemoveAll(filepath.Dir(binPath)) // the binary built once for the process tests
	}
	os.Exit(code)
}
