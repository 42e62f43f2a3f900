package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The decision bound to the run, through the built binary: a sidecar
// serving an agent that trusts confined calls, toolpdp exec --decision
// taking the execution of one allow, and the Claude Code hook rewriting an
// allowed Bash call into exactly that run.

const envSecret = "SECRET=hunter2-in-dotenv"

type confinedSidecar struct {
	addr, work string
	client     pb.DecisionServiceClient
}

// startConfinedSidecar serves agent "boxed" (execution_policy.confinement
// trusted; deny_commands curl; .env protected) over a workspace holding a
// .env, a .git and a file with a TODO.
func startConfinedSidecar(t *testing.T) confinedSidecar {
	t.Helper()
	probeKernel(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "p")
	for name, content := range map[string]string{"a.txt": "TODO first\n", "sub/b.txt": "TODO second\n", ".env": envSecret + "\n", ".git/config": "[core]\n"} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agents, err := json.Marshal(map[string]any{"boxed": map[string]any{
		"tools": []any{map[string]any{"type": "agent_toolset", "default_config": map[string]any{"permission_policy": map[string]any{"type": "always_allow"}}}},
		"execution_policy": map[string]any{"cwd": work, "read_paths": []string{work}, "write_paths": []string{work}, "network": "none",
			"confinement": "trusted"},
		"guardrails": map[string]any{"deny_commands": []string{"curl"}, "protected_paths": []string{".env"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	bdir := t.TempDir()
	for name, content := range map[string]string{".manifest": `{"revision": "c1", "roots": ["agents"]}`, "agents/data.json": string(agents)} {
		p := filepath.Join(bdir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(t.TempDir(), "toolpdp.sock")
	p := start(t, "serve", "--bundle", bdir, "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off", "--eval-timeout", "10s")
	conn := dialUnix(t, sock)
	waitServing(t, conn, p)
	return confinedSidecar{addr: "unix://" + sock, work: work, client: pb.NewDecisionServiceClient(conn)}
}

func (s confinedSidecar) decide(t *testing.T, command string, confined bool) *pb.DecideResponse {
	t.Helper()
	args, err := structpb.NewStruct(map[string]any{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := s.client.Decide(ctx, &pb.DecideRequest{AgentId: "boxed", ToolName: "Bash", Args: args, Confined: confined})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// runShell runs a shell command line under real bash, as Claude Code runs
// a Bash call, with the sidecar's address in its environment.
func (s confinedSidecar) runShell(t *testing.T, line string) runResult {
	t.Helper()
	return s.runShellIn(t, s.work, line)
}

func (s confinedSidecar) runShellIn(t *testing.T, dir, line string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TOOLPDP_ADDR="+s.addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%q did not finish in time\n%s", line, stderr.String())
	}
	return runResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A confined allow's execution runs exactly the command decided, once:
// the recursive read beside .env that is an ask unconfined is allowed
// confined and prints nothing of .env; another command, or the same one
// again, runs nothing (exit 126).
func TestExecDecisionRunsExactlyTheDecidedCommand(t *testing.T) {
	s := startConfinedSidecar(t)
	bin := binary(t)
	const grep = "grep -rn TODO ."
	if r := s.decide(t, grep, false); r.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("unconfined %q: %s (%s), want an ask", grep, r.Decision, r.Message)
	}
	allow := s.decide(t, grep, true)
	if allow.Decision != pb.Decision_DECISION_ALLOW || !allow.GetExecution().GetConfinementRequired() {
		t.Fatalf("confined %q: %s (%s) %v, want an allow that requires confinement", grep, allow.Decision, allow.Message, allow.GetExecution())
	}
	run := func(command string) runResult {
		return s.runShell(t, fmt.Sprintf("'%s' exec --decision %s --command-b64 %s", bin, allow.DecisionId, b64(command)))
	}
	if r := run("cat .env"); r.code != 126 || strings.Contains(r.stdout, "hunter2") {
		t.Errorf("another command under the allow: exit %d, stdout %q; want 126 and nothing run\n%s", r.code, r.stdout, r.stderr)
	}
	r := run(grep)
	if !strings.Contains(r.stdout, "TODO first") {
		t.Errorf("the decided command did not run (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "hunter2") {
		t.Errorf("the confined grep printed .env:\n%s", r.stdout)
	}
	if r := run(grep); r.code != 126 || r.stdout != "" {
		t.Errorf("the execution fetched a second time: exit %d, stdout %q; want 126\n%s", r.code, r.stdout, r.stderr)
	}

	// It runs where the agent is when that is inside the scopes, else in
	// the pinned cwd.
	for dir, want := range map[string]string{filepath.Join(s.work, "sub"): "./b.txt:1:TODO second", t.TempDir(): "./a.txt:1:TODO first"} {
		again := s.decide(t, grep, true)
		r := s.runShellIn(t, dir, fmt.Sprintf("'%s' exec --decision %s --command-b64 %s", bin, again.DecisionId, b64(grep)))
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run from %s: stdout %q, want %q\n%s", dir, r.stdout, want, r.stderr)
		}
	}
}

// updatedCommand is the form the hook rewrites an allowed Bash call into.
var updatedCommand = regexp.MustCompile(`^'([^']+)' exec --decision ([0-9a-f-]{36}) --command-b64 ([A-Za-z0-9+/=]+)$`)

// The Claude Code hook answers an allowed Bash call with updatedInput
// running it through toolpdp exec --decision: real hook JSON on stdin,
// the answer's command run by real bash. Whatever the analysis makes of
// each command, what runs reads nothing of .env, changes nothing in .git
// and reaches no listener.
func TestHookRunsAllowedBashConfined(t *testing.T) {
	needPrograms(t, "bash", "grep", "cat")
	s := startConfinedSidecar(t)
	bin := binary(t)
	l := loopbackListener(t)
	for i, command := range []string{
		"grep -rn TODO .",
		fmt.Sprintf(`$'\x{63}url' -s http://%s/`, l.addr),
		"cat .[[:alpha:]]nv",
		fmt.Sprintf(`choom -n 0 -- curl -s http://%s/`, l.addr),
		"exec 3<.git; echo x > /dev/fd/3/config",
		fmt.Sprintf(`exec 4<>/dev/tcp/127.0.0.1/%d`, l.port),
		"echo ls | bash",
	} {
		ev := fixture(t, "pretooluse-bash.json", map[string]any{"session_id": fmt.Sprintf("confined-%d", i), "tool_use_id": fmt.Sprintf("toolu_c%d", i),
			"tool_input": map[string]any{"command": command, "description": "a test"}})
		h := runHook(t, ev, "--addr", s.addr, "--agent-id", "boxed")
		out := h.out.HookSpecificOutput
		if h.code != 0 || out == nil {
			t.Fatalf("%q: hook exit %d, stdout %s, stderr %s", command, h.code, h.stdout, h.stderr)
		}
		var full struct {
			HookSpecificOutput struct {
				UpdatedInput map[string]any `json:"updatedInput"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal([]byte(h.stdout), &full); err != nil {
			t.Fatal(err)
		}
		updated := full.HookSpecificOutput.UpdatedInput
		t.Logf("%q: %s (%s)", command, out.PermissionDecision, out.PermissionDecisionReason)
		if out.PermissionDecision != "allow" {
			if updated != nil {
				t.Errorf("%q: %s with updatedInput %v", command, out.PermissionDecision, updated)
			}
			continue
		}
		line, _ := updated["command"].(string)
		m := updatedCommand.FindStringSubmatch(line)
		if m == nil || m[1] != bin || m[3] != b64(command) || updated["description"] != "a test" {
			t.Fatalf("%q: updatedInput %v, want the command exactly '%s' exec --decision ID --command-b64 %s and the other fields kept", command, updated, bin, b64(command))
		}
		r := s.runShell(t, line)
		if strings.Contains(r.stdout, "hunter2") || strings.Contains(r.stderr, "hunter2") {
			t.Errorf("%q run through the hook's rewrite printed .env:\n%s\n%s", command, r.stdout, r.stderr)
		}
		if command == "grep -rn TODO ." && !strings.Contains(r.stdout, "TODO first") {
			t.Errorf("%q under the rewrite did not run (exit %d):\n%s\n%s", command, r.code, r.stdout, r.stderr)
		}
	}
	if n := l.count.Load(); n != 0 {
		t.Errorf("%d connections reached the loopback listener", n)
	}
	if b, _ := os.ReadFile(filepath.Join(s.work, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config is now %q", b)
	}
}

// Told not to confine, the hook decides without confined: the recursive
// read beside .env is an ask again, and nothing is rewritten.
func TestHookWithoutConfinementDecidesUnconfined(t *testing.T) {
	s := startConfinedSidecar(t)
	ev := fixture(t, "pretooluse-bash.json", map[string]any{"session_id": "unconfined", "tool_input": map[string]any{"command": "grep -rn TODO ."}})
	h := runHook(t, ev, "--addr", s.addr, "--agent-id", "boxed", "--confine=false")
	wantDecision(t, "--confine=false", h, "ask", false)
	if strings.Contains(h.stdout, "updatedInput") {
		t.Errorf("an unconfined answer carries updatedInput: %s", h.stdout)
	}
}
