// Package decisionrun runs decision tests: files in the conformance
// corpus format that state what a policy must decide — a tree of files
// to create, then steps of Decide, Confirm, ReportResult and
// AwaitDecision with the answers expected. The project's conformance test
// runs shared/conformance through it over a real gRPC server, and
// `toolpdp test` runs a bundle's own *.decisions.json and *.decisions.yaml
// files against the bundle. It is part of the release binary, so it links
// nothing of Go's testing package; the tests' helpers around it live in
// internal/testkit.
package decisionrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/internal/strictjson"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// File is one decision-test file.
type File struct {
	Name   string                     `json:"name"`
	Agents map[string]json.RawMessage `json:"agents,omitempty"`
	Files  []Node                     `json:"files,omitempty"`
	Steps  []Step                     `json:"steps"`
}

// Node is an entry of the tree created under $ROOT before the steps.
type Node struct {
	Path    string  `json:"path"`
	Dir     bool    `json:"dir,omitempty"`
	Symlink *string `json:"symlink,omitempty"`
}

// Step is a Decide (Request), a Confirm, a ReportResult or a reload of
// the agent definitions.
type Step struct {
	Request      json.RawMessage            `json:"request,omitempty"`
	Expect       *Expect                    `json:"expect,omitempty"`
	ReloadAgents map[string]json.RawMessage `json:"reload_agents,omitempty"`
	Confirm      *Confirm                   `json:"confirm,omitempty"`
	Report       *Report                    `json:"report,omitempty"`
	Await        *Await                     `json:"await,omitempty"`
	// Confined, beside a request, sends it as a call that will run
	// confined (DecideRequest.confined), as the request's own "confined"
	// field does.
	Confined bool `json:"confined,omitempty"`
	// Note says, for people, what the step shows.
	Note string `json:"note,omitempty"`
}

// Await waits for a person's answer to the ask of step Step.
type Await struct {
	Step        int   `json:"step"`
	WaitSeconds int32 `json:"wait_seconds,omitempty"`
}

// Confirm answers the ask of step Step.
type Confirm struct {
	Step        int    `json:"step"`
	Result      string `json:"result"`
	Remember    bool   `json:"remember,omitempty"`
	DenyMessage string `json:"deny_message,omitempty"`
}

// Report reports how the allowed call of step Step ended.
type Report struct {
	Step    int    `json:"step"`
	IsError bool   `json:"is_error,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Expect is what a step must answer; an absent key is not checked.
type Expect struct {
	Decision        string            `json:"decision,omitempty"`
	DecisionIn      []string          `json:"decision_in,omitempty"`
	MessageContains []string          `json:"message_contains,omitempty"`
	Halt            *bool             `json:"halt,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	Cwd             *string           `json:"cwd,omitempty"`
	Code            string            `json:"code,omitempty"`  // a gRPC status name, for confirm, report and await steps
	State           string            `json:"state,omitempty"` // an await step's ask state: ASK_STATE_PENDING, …
}

// IsFile reports whether a file name is a decision-test file's.
func IsFile(name string) bool {
	for _, ext := range []string{".decisions.json", ".decisions.yaml", ".decisions.yml"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// Find lists the decision-test files under dir, sorted.
func Find(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), "..") {
			return filepath.SkipDir // a Kubernetes volume's timestamped copies
		}
		if !d.IsDir() && IsFile(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// Read reads and parses a decision-test file, JSON or YAML. Unknown keys
// are errors: a misspelt expectation must not pass silently.
func Read(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, raw)
}

// Parse parses the content of the decision-test file name.
func Parse(name string, raw []byte) (*File, error) {
	if !strings.HasSuffix(name, ".json") {
		var v any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		raw = j
	}
	// Read strictly, as the sidecar's other inputs an agent can shape:
	// a test must mean one thing to every reader of it.
	if err := strictjson.Check(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if f.Name == "" {
		f.Name = filepath.Base(name)
	}
	for i, s := range f.Steps {
		kinds := 0
		for _, set := range []bool{s.Request != nil, s.ReloadAgents != nil, s.Confirm != nil, s.Report != nil, s.Await != nil} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return nil, fmt.Errorf("%s: steps[%d]: one of request, confirm, report, await or reload_agents, not %d", name, i, kinds)
		}
		if s.Confined && s.Request == nil {
			return nil, fmt.Errorf("%s: steps[%d]: confined goes with a request only", name, i)
		}
	}
	return &f, nil
}

// Failure is a step that did not answer as expected.
type Failure struct {
	Step     int    // index in steps
	What     string // "Decide Bash {...}", "Confirm of step 2"
	Problems []string
	Rules    []string // a Decide's every reason, "axis/rule=EFFECT": the rules that fired
}

func (f Failure) String() string {
	s := fmt.Sprintf("steps[%d] %s: %s", f.Step, f.What, strings.Join(f.Problems, "; "))
	if len(f.Rules) > 0 {
		s += "; rules that fired: " + strings.Join(f.Rules, ", ")
	}
	return s
}

// Result is what one file's run found.
type Result struct {
	Steps    int       // steps run
	Failures []Failure // steps that failed
	Messages []string  // every message the server answered with: responses' and reasons'
}

// Target is the server a file runs against.
type Target struct {
	Client pb.DecisionServiceClient
	// ReloadAgents replaces the agent definitions and returns once the
	// server serves them; nil: a reload_agents step fails.
	ReloadAgents func(ctx context.Context, agents []byte) error
	// Timeout bounds each call; 10s when zero.
	Timeout time.Duration
}

// MakeTree creates the file's tree under root.
func MakeTree(f *File, root string) error {
	for _, n := range f.Files {
		p := filepath.Join(root, filepath.FromSlash(n.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		var err error
		switch {
		case n.Dir:
			err = os.MkdirAll(p, 0o755)
		case n.Symlink != nil:
			err = os.Symlink(strings.ReplaceAll(*n.Symlink, "$ROOT", root), p)
		default:
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			return fmt.Errorf("files: %s: %w", n.Path, err)
		}
	}
	return nil
}

// Sub replaces $ROOT by root in every string of a JSON document.
func Sub(raw []byte, root string) []byte {
	// root is a plain path: safe inside a JSON string once escaped.
	esc, _ := json.Marshal(root)
	return bytes.ReplaceAll(raw, []byte("$ROOT"), esc[1:len(esc)-1])
}

// Run runs the steps of f against t, in order; root is the directory the
// tree was made in (MakeTree). An error is returned only when a step
// cannot be run at all (a request that is not a DecideRequest).
func Run(ctx context.Context, f *File, root string, t Target) (Result, error) {
	if t.Timeout == 0 {
		t.Timeout = 10 * time.Second
	}
	var res Result
	ids := map[int]string{} // decision ids by step
	idOf := func(step int) string {
		if id, ok := ids[step]; ok {
			return id
		}
		return fmt.Sprintf("never-issued-step-%d", step) // a K naming no Decide step
	}
	fail := func(i int, what string, problems []string) {
		if len(problems) > 0 {
			res.Failures = append(res.Failures, Failure{Step: i, What: what, Problems: problems})
		}
	}
	for i, step := range f.Steps {
		res.Steps++
		ctx, cancel := context.WithTimeout(ctx, t.Timeout)
		switch {
		case step.ReloadAgents != nil:
			if t.ReloadAgents == nil {
				fail(i, "reload_agents", []string{"reload_agents is not supported here: decision tests in a bundle run against the bundle's own agents"})
				break
			}
			agents, _ := json.Marshal(step.ReloadAgents)
			if err := t.ReloadAgents(ctx, Sub(agents, root)); err != nil {
				fail(i, "reload_agents", []string{err.Error()})
			}
		case step.Confirm != nil:
			cf := step.Confirm
			r, err := t.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: idOf(cf.Step), Result: cf.Result, Remember: cf.Remember, DenyMessage: cf.DenyMessage})
			var decision *pb.Decision
			if err == nil {
				decision = &r.Decision
			}
			fail(i, fmt.Sprintf("Confirm of step %d", cf.Step), step.Expect.checkAnswer(decision, r.GetHalt(), err))
		case step.Report != nil:
			rp := step.Report
			r, err := t.Client.ReportResult(ctx, &pb.ReportResultRequest{DecisionId: idOf(rp.Step), IsError: rp.IsError, Error: rp.Error})
			fail(i, fmt.Sprintf("ReportResult of step %d", rp.Step), step.Expect.checkAnswer(nil, r.GetHalt(), err))
		case step.Await != nil:
			aw := step.Await
			r, err := t.Client.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: idOf(aw.Step), WaitSeconds: aw.WaitSeconds})
			var decision *pb.Decision
			if err == nil {
				decision = &r.Decision
				res.Messages = append(res.Messages, r.Message)
			}
			problems := step.Expect.checkAnswer(decision, r.GetHalt(), err)
			if err == nil {
				problems = append(problems, step.Expect.checkAwait(r, root)...)
			}
			fail(i, fmt.Sprintf("AwaitDecision of step %d", aw.Step), problems)
		default:
			var req pb.DecideRequest
			if err := protojson.Unmarshal(Sub(step.Request, root), &req); err != nil {
				cancel()
				return res, fmt.Errorf("steps[%d].request: not a DecideRequest: %w", i, err)
			}
			if step.Confined {
				req.Confined = true
			}
			what := fmt.Sprintf("Decide %s %s", req.GetToolName(), compact(step.Request))
			resp, err := t.Client.Decide(ctx, &req)
			if err != nil {
				fail(i, what, []string{fmt.Sprintf("Decide failed: %v", err)})
				break
			}
			ids[i] = resp.DecisionId
			res.Messages = append(res.Messages, resp.Message)
			for _, r := range resp.Reasons {
				res.Messages = append(res.Messages, r.Message)
			}
			if problems := step.Expect.check(resp, root); len(problems) > 0 {
				fl := Failure{Step: i, What: what, Problems: problems}
				for _, r := range resp.Reasons {
					fl.Rules = append(fl.Rules, fmt.Sprintf("%s/%s=%s", r.GetAxis(), r.GetRule(), strings.TrimPrefix(r.GetEffect().String(), "DECISION_")))
				}
				res.Failures = append(res.Failures, fl)
			}
		}
		cancel()
	}
	return res, nil
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// checkAnswer checks a Confirm or ReportResult step: its status code, or
// the decision and halt it answered with.
func (e *Expect) checkAnswer(decision *pb.Decision, halt bool, err error) []string {
	if e == nil {
		e = &Expect{}
	}
	want := e.Code
	if want == "" {
		want = "OK"
	}
	if got := CodeName(status.Code(err)); got != want {
		if err != nil {
			return []string{fmt.Sprintf("code %s, want %s (%s)", got, want, status.Convert(err).Message())}
		}
		return []string{fmt.Sprintf("code %s, want %s", got, want)}
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

// CodeName is a status code as the corpus spells it: FAILED_PRECONDITION.
func CodeName(c codes.Code) string {
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
	return strings.ToUpper(b.String())
}

// checkAwait checks what only an AwaitDecision answers: the ask's state
// and the message.
func (e *Expect) checkAwait(r *pb.AwaitDecisionResponse, root string) []string {
	if e == nil {
		return nil
	}
	var bad []string
	if e.State != "" && r.State.String() != e.State {
		bad = append(bad, fmt.Sprintf("state %s, want %s (message %q)", r.State, e.State, r.Message))
	}
	for _, w := range e.MessageContains {
		if w = strings.ReplaceAll(w, "$ROOT", root); !strings.Contains(r.Message, w) {
			bad = append(bad, fmt.Sprintf("message %q lacks %q", r.Message, w))
		}
	}
	return bad
}

func (e *Expect) check(resp *pb.DecideResponse, root string) []string {
	if e == nil {
		return nil
	}
	sub := func(s string) string { return strings.ReplaceAll(s, "$ROOT", root) }
	var bad []string
	if e.Decision != "" && resp.Decision.String() != e.Decision {
		bad = append(bad, fmt.Sprintf("decision %s, want %s (message %q)", resp.Decision, e.Decision, resp.Message))
	}
	if e.DecisionIn != nil && !slices.Contains(e.DecisionIn, resp.Decision.String()) {
		bad = append(bad, fmt.Sprintf("decision %s, want one of %v (message %q)", resp.Decision, e.DecisionIn, resp.Message))
	}
	for _, w := range e.MessageContains {
		if w = sub(w); !strings.Contains(resp.Message, w) {
			bad = append(bad, fmt.Sprintf("message %q lacks %q", resp.Message, w))
		}
	}
	if e.Halt != nil && resp.Halt != *e.Halt {
		bad = append(bad, fmt.Sprintf("halt %v, want %v", resp.Halt, *e.Halt))
	}
	if e.Env != nil {
		want := map[string]string{}
		for k, v := range e.Env {
			want[k] = sub(v)
		}
		got := resp.GetExecution().GetEnv()
		if got == nil {
			got = map[string]string{}
		}
		if !reflect.DeepEqual(got, want) {
			bad = append(bad, fmt.Sprintf("env %v, want %v", got, want))
		}
	}
	if e.Cwd != nil && resp.GetExecution().GetCwd() != sub(*e.Cwd) {
		bad = append(bad, fmt.Sprintf("cwd %q, want %q", resp.GetExecution().GetCwd(), sub(*e.Cwd)))
	}
	return bad
}

// ErrNoAgents is returned by Check for a file with agents of its own run
// against a bundle: its agents are the bundle's.
var ErrNoAgents = errors.New("agents: a decision test in a bundle runs against the bundle's own agent definitions; remove the agents key")

// Replay lays out f for replaying its requests: its tree under dir/root,
// its agents as a bundle in dir/bundle (as the conformance test writes
// them), and its requests with $ROOT substituted, in order. Confirms and
// reloads are not requests and are left out.
func Replay(f *File, dir string) (bundleDir string, reqs []*pb.DecideRequest, err error) {
	root := filepath.Join(dir, "root")
	if err := MakeTree(f, root); err != nil {
		return "", nil, err
	}
	bundleDir = filepath.Join(dir, "bundle")
	agents, err := json.Marshal(f.Agents)
	if err != nil {
		return "", nil, err
	}
	for name, content := range map[string][]byte{
		"agents/data.json": Sub(agents, root),
		".manifest":        []byte(`{"revision": "trace", "roots": ["agents"]}`),
	} {
		p := filepath.Join(bundleDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return "", nil, err
		}
	}
	for i, s := range f.Steps {
		if s.Request == nil {
			continue
		}
		var req pb.DecideRequest
		if err := protojson.Unmarshal(Sub(s.Request, root), &req); err != nil {
			return "", nil, fmt.Errorf("steps[%d].request: %w", i, err)
		}
		if s.Confined {
			req.Confined = true
		}
		reqs = append(reqs, &req)
	}
	return bundleDir, reqs, nil
}
