// Package testkit holds what the tests of pdp, grpcapi and cmd share: bundles
// written to a temporary directory, and small helpers around them.
package testkit

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/pdp/decisionrun"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// EvalTimeout is the bound on one evaluation for every server a test
// starts, in process or as the built binary. The shipped 100ms is a
// production bound; on two loaded cores under the race detector a plain
// allow can take longer, and the fail-closed deny it would turn into is
// not what any test is about. Only a real hang should fail a test, so the
// bound is generous; a test of the timeout itself sets its own.
const EvalTimeout = 30 * time.Second

// SessionAgents is an agent "a" with a disabled tool (rm), an asking one
// (bash) and a cap of 3 consecutive denials.
const SessionAgents = `{"a": {"tools": [{"type": "agent_toolset", "configs": [{"name": "rm", "enabled": false}, {"name": "bash", "permission_policy": {"type": "always_ask"}}]}], "max_consecutive_denials": 3}}`

// PendingConformance reads testdata/conformance-pending, the one list of
// conformance files whose feature is not built yet, a line each: the
// file's name and the issue that will make it pass. Every test that runs
// the corpus skips exactly these; ../shared/tools/run-conformance reads
// the same file.
func PendingConformance(tb testing.TB) map[string]string {
	tb.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../testdata/conformance-pending"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	pending := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			pending[f[0]] = strings.Join(f[1:], " ")
		}
	}
	return pending
}

// WriteBundle writes files (path -> content) into a new temporary
// directory and returns it.
func WriteBundle(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Manifest is a .manifest of revision rev with the roots agents and
// guardrails.
func Manifest(rev string) string {
	return fmt.Sprintf(`{"revision": %q, "roots": ["agents", "guardrails"]}`, rev)
}

// Struct is m as a protobuf Struct.
func Struct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SyncBuffer is a bytes.Buffer safe for a writer goroutine and the test.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CounterValue is a counter's value now.
func CounterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Tarball is files packed as an `opa build`-style .tar.gz: each file's
// name starts with "/".
func Tarball(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "/" + name, Mode: 0o644, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ReplayOrSkip is decisionrun.Replay of the file at path under a temporary
// directory, for a test or benchmark: skipped when the file cannot be read
// (a trace kept outside the repository may be absent), failed on any other
// error.
func ReplayOrSkip(tb testing.TB, path string) (bundleDir string, reqs []*pb.DecideRequest) {
	tb.Helper()
	f, err := decisionrun.Read(path)
	if err != nil {
		tb.Skip(err)
	}
	bundleDir, reqs, err = decisionrun.Replay(f, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return bundleDir, reqs
}
