package policy

import (
	"context"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/pdp/bundles"
)

// BenchmarkLoad is a whole reload off to the side: read, validate, merge,
// compile, prepare, index (no swap).
func BenchmarkLoad(b *testing.B) {
	for name, paths := range map[string][]string{"default": nil, "realistic": {"../../testdata/bench"}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Load(context.Background(), &bundles.Sources{Paths: paths}, time.Minute, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
