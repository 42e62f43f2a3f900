package envguard

import (
	"context"
	"errors"
	"testing"
)

// Resolution stops when its context is done: a caller that has gone away
// costs no more system calls.
func TestResolveContextStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ResolveContext(ctx, "/", "/tmp/a/b/c")
	if !errors.Is(err, ErrUnresolved) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want ErrUnresolved wrapping context.Canceled", err)
	}
}
