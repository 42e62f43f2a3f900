package pdp

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The decision cache must never change an answer. These tests run the same
// calls through two engines on the same bundles, one caching and one not,
// and compare every field of every answer but decision_id.

// corpusDir is shared/conformance, beside the repository.
const corpusDir = "../../shared/conformance"

// twins are two engines on the same bundles: cached and uncached.
type twins struct {
	cached, plain *Engine
	ids           map[int][2]string // decision ids by step: cached, plain
}

func newTwins(t testing.TB, paths ...string) *twins {
	t.Helper()
	return &twins{
		cached: loadedEngine(t, Config{Bundles: paths}),
		plain:  loadedEngine(t, Config{Bundles: paths, DecisionCache: -1}),
		ids:    map[int][2]string{},
	}
}

// decide asks both, warming the cache first so that the cached engine's
// answer comes from it whenever the call can be cached, and compares.
func (tw *twins) decide(t *testing.T, step int, req *pb.DecideRequest) *pb.DecideResponse {
	t.Helper()
	ctx := context.Background()
	if a := tw.cached.current.Load(); a != nil && a.memo != nil {
		a.snap.DecideMemo(ctx, req, nil, a.memo)
	}
	got, err := tw.cached.Decide(ctx, "", req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tw.plain.Decide(ctx, "", req)
	if err != nil {
		t.Fatal(err)
	}
	tw.ids[step] = [2]string{got.DecisionId, want.DecisionId}
	compareResponses(t, fmt.Sprintf("step %d %s", step, req.GetToolName()), got, want)
	return got
}

func compareResponses(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	g, w := proto.Clone(got), proto.Clone(want)
	for _, m := range []proto.Message{g, w} {
		if r, ok := m.(*pb.DecideResponse); ok {
			r.DecisionId = ""
		}
	}
	if !proto.Equal(g, w) {
		t.Errorf("%s: cached and uncached answers differ:\ncached:   %v\nuncached: %v", what, g, w)
	}
}

func (tw *twins) reload(t *testing.T) {
	t.Helper()
	for _, e := range []*Engine{tw.cached, tw.plain} {
		if err := e.Reload(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	}
}

func (tw *twins) hits(t testing.TB) float64 {
	return testkit.CounterValue(t, tw.cached.memo.WithLabelValues("hit"))
}

type corpusCase struct {
	Agents map[string]json.RawMessage `json:"agents"`
	Files  []struct {
		Path    string  `json:"path"`
		Dir     bool    `json:"dir"`
		Symlink *string `json:"symlink"`
	} `json:"files"`
	Steps []struct {
		Request      json.RawMessage            `json:"request"`
		ReloadAgents map[string]json.RawMessage `json:"reload_agents"`
		Confirm      *struct {
			Step        int    `json:"step"`
			Result      string `json:"result"`
			Remember    bool   `json:"remember"`
			DenyMessage string `json:"deny_message"`
		} `json:"confirm"`
		Await *struct {
			Step        int   `json:"step"`
			WaitSeconds int32 `json:"wait_seconds"`
		} `json:"await"`
		Report *struct {
			Step    int    `json:"step"`
			IsError bool   `json:"is_error"`
			Error   string `json:"error"`
		} `json:"report"`
	} `json:"steps"`
}

// TestDecisionCacheConformance runs every file of shared/conformance with
// the cache on and off: every Decide, Confirm and ReportResult answer alike.
func TestDecisionCacheConformance(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.json"))
	if len(files) == 0 {
		t.Skipf("no conformance corpus at %s: a clone that stands alone", corpusDir)
	}
	hits, pending := 0.0, testkit.PendingConformance(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if issue, ok := pending[filepath.Base(f)]; ok {
				t.Skipf("pending: issue %s (testdata/conformance-pending)", issue)
			}
			hits += runCorpusTwins(t, f)
		})
	}
	if hits == 0 {
		t.Error("the cache never answered: the comparison proved nothing")
	}
}

func runCorpusTwins(t *testing.T, file string) float64 {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub := func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), "$ROOT", root)) }
	var c corpusCase
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Skipf("%s is not a decision case: %v", file, err)
	}
	if c.Steps == nil {
		t.Skipf("%s has no steps", file)
	}
	for _, f := range c.Files {
		p := filepath.Join(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Dir:
			err = os.MkdirAll(p, 0o755)
		case f.Symlink != nil:
			err = os.Symlink(string(sub([]byte(*f.Symlink))), p)
		default:
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	bdir := t.TempDir()
	rev := 1
	writeAgents := func(agents map[string]json.RawMessage) {
		enc, err := json.Marshal(agents)
		if err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{
			"agents/data.json": string(sub(enc)),
			".manifest":        fmt.Sprintf(`{"revision": "r%d", "roots": ["agents"]}`, rev),
		} {
			p := filepath.Join(bdir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeAgents(c.Agents)
	tw := newTwins(t, bdir)
	for i, step := range c.Steps {
		switch {
		case step.ReloadAgents != nil:
			rev++
			writeAgents(step.ReloadAgents)
			tw.reload(t)
		case step.Confirm != nil:
			cf := step.Confirm
			ids := tw.ids[cf.Step]
			got, gerr := tw.cached.Confirm(context.Background(), "", "test", &pb.ConfirmRequest{DecisionId: ids[0], Result: cf.Result, Remember: cf.Remember, DenyMessage: cf.DenyMessage})
			want, werr := tw.plain.Confirm(context.Background(), "", "test", &pb.ConfirmRequest{DecisionId: ids[1], Result: cf.Result, Remember: cf.Remember, DenyMessage: cf.DenyMessage})
			if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != strings.ReplaceAll(werr.Error(), ids[1], ids[0])) {
				t.Errorf("step %d Confirm: errors differ: %v / %v", i, gerr, werr)
			} else if gerr == nil {
				compareResponses(t, fmt.Sprintf("step %d Confirm", i), got, want)
			}
		case step.Report != nil:
			rp := step.Report
			ids := tw.ids[rp.Step]
			got, gerr := tw.cached.ReportResult(context.Background(), "", &pb.ReportResultRequest{DecisionId: ids[0], IsError: rp.IsError, Error: rp.Error})
			want, werr := tw.plain.ReportResult(context.Background(), "", &pb.ReportResultRequest{DecisionId: ids[1], IsError: rp.IsError, Error: rp.Error})
			if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != strings.ReplaceAll(werr.Error(), ids[1], ids[0])) {
				t.Errorf("step %d ReportResult: errors differ: %v / %v", i, gerr, werr)
			} else if gerr == nil {
				compareResponses(t, fmt.Sprintf("step %d ReportResult", i), got, want)
			}
		case step.Await != nil:
			aw := step.Await
			ids, ok := tw.ids[aw.Step]
			if !ok {
				ids = [2]string{"never-issued", "never-issued"}
			}
			got, gerr := tw.cached.AwaitDecision(context.Background(), "", &pb.AwaitDecisionRequest{DecisionId: ids[0]})
			want, werr := tw.plain.AwaitDecision(context.Background(), "", &pb.AwaitDecisionRequest{DecisionId: ids[1]})
			if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != strings.ReplaceAll(werr.Error(), ids[1], ids[0])) {
				t.Errorf("step %d AwaitDecision: errors differ: %v / %v", i, gerr, werr)
			} else if gerr == nil {
				got.DecisionId = want.DecisionId
				compareResponses(t, fmt.Sprintf("step %d AwaitDecision", i), got, want)
			}
		default:
			var req pb.DecideRequest
			if err := protojson.Unmarshal(sub(step.Request), &req); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			tw.decide(t, i, &req)
		}
	}
	return tw.hits(t)
}

// TestDecisionCacheProperty compares cached and uncached answers over
// generated calls: every tool family, agents known and not, call-site
// policies, envs, paths through symlinks that change between calls, and
// commands — on the default, the realistic and the guardrail-example
// bundles. It checks a fixed number of calls from a fixed seed;
// FuzzDecisionCache runs the same generator for as long as it is given,
// which CI (.ci/run) does for a bounded time.
func TestDecisionCacheProperty(t *testing.T) {
	root := cacheTree(t)
	for name, paths := range cacheBundles {
		t.Run(name, func(t *testing.T) {
			tw := newTwins(t, paths...)
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			for i := range 100 {
				tw.decide(t, i, cacheCall(t, rng, root))
			}
			if ok, _ := tw.cached.Snapshot().Memoizable(); ok && tw.hits(t) == 0 {
				t.Error("the cache never answered: the comparison proved nothing")
			}
		})
	}
}

// FuzzDecisionCache is TestDecisionCacheProperty's generator run from the
// fuzzer's seeds: each input picks the bundles and a run of calls. The
// engines of a bundle set are built when an input first picks it, so that
// go test, which runs only the seeds (all on the default bundles), builds
// one pair.
func FuzzDecisionCache(f *testing.F) {
	root := cacheTree(f)
	names := []string{"default", "realistic", "guardrail-examples"}
	var mu sync.Mutex
	all := map[string]*twins{}
	for i := range uint64(4) {
		f.Add(i*uint64(len(names)), i*7919)
	}
	f.Fuzz(func(t *testing.T, pick, seed uint64) {
		name := names[pick%uint64(len(names))]
		mu.Lock()
		tw, ok := all[name]
		if !ok {
			tw = newTwins(t, cacheBundles[name]...)
			all[name] = tw
		}
		mu.Unlock()
		rng := rand.New(rand.NewPCG(pick, seed))
		for i := range 8 {
			tw.decide(t, i, cacheCall(t, rng, root))
		}
	})
}

// cacheBundles are the bundle sets the cache is compared on.
var cacheBundles = map[string][]string{"default": nil, "realistic": {"../testdata/bench"}, "guardrail-examples": {"../testdata/guardrail-examples"}}

// cacheTree is the directory the generated calls name: src, other and
// .git, and a link that cacheCall points at one of them.
func cacheTree(tb testing.TB) string {
	root, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range []string{"src", "other", ".git"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return root
}

// cacheCall is one generated call. The file system changes under the
// cache first: root/link points into scope, then out of it.
func cacheCall(tb testing.TB, rng *rand.Rand, root string) *pb.DecideRequest {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	link := filepath.Join(root, "link")
	os.Remove(link)
	if err := os.Symlink(filepath.Join(root, pick("src", "other", ".git")), link); err != nil {
		tb.Fatal(err)
	}
	req := &pb.DecideRequest{
		AgentId:   pick("", "default", "agent3", "agent7", "nobody", "coder"),
		SessionId: pick("", "s1", "s2"),
		ToolName:  pick("Read", "Write", "Grep", "Glob", "Bash", "Exec", "WebFetch", "tool_7", "unlisted", "mcp__crm__export", "mcp__wiki__page", "local_shell"),
		Server:    pick("", "", "", "wiki"),
		Category:  pb.Category(rng.IntN(3)),
	}
	args := map[string]any{}
	switch rng.IntN(4) {
	case 0:
		args["file_path"] = pick("src/a.go", root+"/link/x", root+"/other/.env", root+"/.git/config", "../etc/passwd", "/usr/lib/os-release")
	case 1:
		args["command"] = pick("ls -la", "cd src && go test ./... | tee out.txt", "rm -rf /", "git push0 origin", "danger3 now", "bash -c \"$X\"", "echo $(id)")
	case 2:
		args["pattern"] = pick("**/*.go", "/etc/*", ".env", "x")
		args["glob"] = pick("*.env", "src/**")
	}
	req.Args = testkit.Struct(tb, args)
	if rng.IntN(2) == 0 {
		req.Env = map[string]string{"PATH": "/usr/bin", pick("LD_PRELOAD", "HOME", "ld_preload", "GOFLAGS", "A B"): "v"}
	}
	if rng.IntN(3) == 0 {
		req.ExecutionPolicy = &pb.ExecutionPolicy{Cwd: pick(root, root+"/link", ""),
			Env:       &pb.EnvSpec{Mode: pick("allowlist", "denylist"), Names: []string{"PATH", "ld_preload"}, IncludeSafeEnvVars: rng.IntN(2) == 0},
			ReadPaths: &pb.PathList{Paths: []string{root + "/src", root + "/link"}}}
	}
	return req
}
