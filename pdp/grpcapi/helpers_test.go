package grpcapi_test

import (
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
)

// startServer is grpcapitest.NewServer with these tests' bound on args:
// 64 KiB, which a test exceeds cheaply.
func startServer(t testing.TB, o grpcapitest.Options) *grpcapitest.Server {
	t.Helper()
	if o.API.MaxArgsBytes == 0 {
		o.API.MaxArgsBytes = 64 << 10
	}
	return grpcapitest.NewServer(t, o)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
