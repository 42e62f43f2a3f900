package grpcapi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// conformanceDir is shared/conformance, beside the repository.
const conformanceDir = "../../../shared/conformance"

// pendingConformance lists the conformance files whose feature is not built
// yet, each with the issue that will make it pass. Nothing else is skipped.
var pendingConformance = map[string]int{}

type conformanceCase struct {
	Name   string                     `json:"name"`
	Agents map[string]json.RawMessage `json:"agents"`
	Files  []struct {
		Path    string  `json:"path"`
		Dir     bool    `json:"dir"`
		Symlink *string `json:"symlink"`
	} `json:"files"`
	Steps []struct {
		Request      json.RawMessage            `json:"request"`
		Expect       *conformanceExpect         `json:"expect"`
		ReloadAgents map[string]json.RawMessage `json:"reload_agents"`
		Confirm      *struct {
			Step        int    `json:"step"`
			Result      string `json:"result"`
			Remember    bool   `json:"remember"`
			DenyMessage string `json:"deny_message"`
		} `json:"confirm"`
		Report *struct {
			Step    int    `json:"step"`
			IsError bool   `json:"is_error"`
			Error   string `json:"error"`
		} `json:"report"`
	} `json:"steps"`
}

type conformanceExpect struct {
	Decision        string            `json:"decision"`
	DecisionIn      []string          `json:"decision_in"`
	MessageContains []string          `json:"message_contains"`
	Halt            *bool             `json:"halt"`
	Env             map[string]string `json:"env"`
	Cwd             *string           `json:"cwd"`
	Code            string            `json:"code"` // a gRPC status name, for confirm and report steps
}

// TestConformance runs every file of shared/conformance through a
// real server over gRPC, with reloads done by rewriting the bundle on disk.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(conformanceDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance files in %s (%v): shared/ must sit beside the repository", conformanceDir, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			if issue, ok := pendingConformance[name]; ok {
				t.Skipf("pending: issue %d", issue)
			}
			runConformance(t, f)
		})
	}
}

func runConformance(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub := func(b []byte) []byte {
		// $ROOT becomes the tree's directory; it is a plain path, safe in JSON.
		return []byte(strings.ReplaceAll(string(b), "$ROOT", root))
	}
	var c conformanceCase
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", file, err)
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
	writeAgentsBundle(t, bdir, sub(mustJSON(t, c.Agents)), fmt.Sprintf("r%d", rev))
	ts := startServer(t, serverOpts{bundles: []string{bdir}, watch: true})
	ids := map[int]string{} // decision ids by step
	idOf := func(step int) string {
		if id, ok := ids[step]; ok {
			return id
		}
		return fmt.Sprintf("never-issued-step-%d", step) // a K naming no Decide step
	}
	for i, step := range c.Steps {
		if step.ReloadAgents != nil {
			rev++
			want := fmt.Sprintf("r%d", rev)
			writeAgentsBundle(t, bdir, sub(mustJSON(t, step.ReloadAgents)), want)
			eventually(t, 10*time.Second, "reload to "+want, func() bool {
				return ts.decide(t, &pb.DecideRequest{AgentId: "__probe__", ToolName: "Read"}).PolicyRevision == "library-0.1.0,"+want
			})
			continue
		}
		if step.Confirm != nil || step.Report != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var decision *pb.Decision
			var halt bool
			var err error
			what := ""
			if cf := step.Confirm; cf != nil {
				what = fmt.Sprintf("Confirm of step %d", cf.Step)
				var r *pb.ConfirmResponse
				r, err = ts.client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: idOf(cf.Step), Result: cf.Result, Remember: cf.Remember, DenyMessage: cf.DenyMessage})
				if err == nil {
					decision, halt = &r.Decision, r.Halt
				}
			} else {
				rp := step.Report
				what = fmt.Sprintf("ReportResult of step %d", rp.Step)
				var r *pb.ReportResultResponse
				r, err = ts.client.ReportResult(ctx, &pb.ReportResultRequest{DecisionId: idOf(rp.Step), IsError: rp.IsError, Error: rp.Error})
				if err == nil {
					halt = r.Halt
				}
			}
			cancel()
			for _, problem := range step.Expect.checkAnswer(decision, halt, err) {
				t.Errorf("step %d %s: %s", i, what, problem)
			}
			continue
		}
		var req pb.DecideRequest
		if err := protojson.Unmarshal(sub(step.Request), &req); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		resp := ts.decide(t, &req)
		ids[i] = resp.DecisionId
		for _, problem := range step.Expect.check(resp, root) {
			t.Errorf("step %d %s %s: %s", i, req.ToolName, string(step.Request), problem)
		}
	}
}

// checkAnswer checks a Confirm or ReportResult step: its status code, or
// the decision and halt it answered with.
func (e *conformanceExpect) checkAnswer(decision *pb.Decision, halt bool, err error) []string {
	want := e.Code
	if want == "" {
		want = "OK"
	}
	if got := strings.ToUpper(codeName(status.Code(err))); got != want {
		return []string{fmt.Sprintf("code %s, want %s (%v)", got, want, err)}
	}
	if err != nil {
		return nil
	}
	var bad []string
	if e.Decision != "" && (decision == nil || decision.String() != e.Decision) {
		bad = append(bad, fmt.Sprintf("decision %v, want %s", decision, e.Decision))
	}
	if e.Halt != nil && halt != *e.Halt {
		bad = append(bad, fmt.Sprintf("halt %v, want %v", halt, *e.Halt))
	}
	return bad
}

// codeName is a status code as the corpus spells it: FAILED_PRECONDITION.
func codeName(c codes.Code) string {
	if c == codes.OK {
		return "OK"
	}
	var b strings.Builder
	for i, r := range c.String() { // "FailedPrecondition"
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (e *conformanceExpect) check(resp *pb.DecideResponse, root string) []string {
	var bad []string
	if e.Decision != "" && resp.Decision.String() != e.Decision {
		bad = append(bad, fmt.Sprintf("decision %s, want %s (message %q)", resp.Decision, e.Decision, resp.Message))
	}
	if e.DecisionIn != nil && !slices.Contains(e.DecisionIn, resp.Decision.String()) {
		bad = append(bad, fmt.Sprintf("decision %s, want one of %v (message %q)", resp.Decision, e.DecisionIn, resp.Message))
	}
	for _, w := range e.MessageContains {
		if w = strings.ReplaceAll(w, "$ROOT", root); !strings.Contains(resp.Message, w) {
			bad = append(bad, fmt.Sprintf("message %q lacks %q", resp.Message, w))
		}
	}
	if e.Halt != nil && resp.Halt != *e.Halt {
		bad = append(bad, fmt.Sprintf("halt %v, want %v", resp.Halt, *e.Halt))
	}
	if e.Env != nil {
		want := map[string]string{}
		for k, v := range e.Env {
			want[k] = strings.ReplaceAll(v, "$ROOT", root)
		}
		got := resp.GetExecution().GetEnv()
		if got == nil {
			got = map[string]string{}
		}
		if !reflect.DeepEqual(got, want) {
			bad = append(bad, fmt.Sprintf("env %v, want %v", got, want))
		}
	}
	if e.Cwd != nil && resp.GetExecution().GetCwd() != strings.ReplaceAll(*e.Cwd, "$ROOT", root) {
		bad = append(bad, fmt.Sprintf("cwd %q, want %q", resp.GetExecution().GetCwd(), *e.Cwd))
	}
	return bad
}

// writeAgentsBundle writes agents/data.json and .manifest, each replaced by
// rename as an editor or a deploy tool would.
func writeAgentsBundle(t *testing.T, dir string, agents []byte, revision string) {
	t.Helper()
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), agents)
	writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(fmt.Sprintf(`{"revision": %q, "roots": ["agents"]}`, revision)))
}

func writeFileAtomic(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
