package grpcapi_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
)

// BenchmarkChangeToServing is the time from a file change (an atomic
// rename, as editors and deploy tools do it) to the new revision answering
// Decide through the real watcher (200 ms debounce) and gRPC. Reports the
// median and maximum over the run; run with -benchtime=20x.
func BenchmarkChangeToServing(b *testing.B) {
	dir := testkit.WriteBundle(b, map[string]string{".manifest": testkit.Manifest("c0"), "agents/data.json": goodAgents})
	ts := startServer(b, grpcapitest.Options{Bundles: []string{dir}, Watch: true, Engine: pdp.Config{Poll: time.Hour}})
	var took []time.Duration
	i := 0
	for b.Loop() {
		i++
		want := fmt.Sprintf("library-0.1.0,c%d", i)
		start := time.Now()
		writeFileAtomic(b, filepath.Join(dir, ".manifest"), []byte(testkit.Manifest(fmt.Sprintf("c%d", i))))
		for ts.Revision(b) != want {
			if time.Since(start) > 10*time.Second {
				b.Fatalf("%s not serving after 10s", want)
			}
			time.Sleep(time.Millisecond)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
