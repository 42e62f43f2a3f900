package policy

import (
	"context"
	"time"

	"github.com/toolpdp/toolpdp/pdp/bundles"
)

// Load reads and builds a snapshot from the sources, running the bundles'
// own _test.rego tests.
func Load(ctx context.Context, src *bundles.Sources, testTimeout time.Duration, now time.Time, opts ...Option) (*Snapshot, error) {
	bs, err := src.Read()
	if err != nil {
		return nil, err
	}
	snap, err := NewSnapshot(ctx, bs, now, opts...)
	if err != nil {
		return nil, err
	}
	if err := runBundleTests(ctx, snap, bs, testTimeout); err != nil {
		return nil, err
	}
	return snap, nil
}
