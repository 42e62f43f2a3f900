package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/notify"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// plantedSecret is a token of a shape the decision log masks, put in an
// ask's arguments: no approver surface may show it unasked.
const plantedSecret = "ghp_plantedSECRETplantedSECRET0123456789"

// listenAddr is the address the server logged for a listener ("serving …").
func listenAddr(t *testing.T, p *process, what string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var line struct{ Msg, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Msg, what) {
				return line.Listen
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %q line:\n%s", what, p.stderr.String())
	return ""
}

// The ask end to end through the built binary: an agent waits, a person
// reads the whole call (secrets masked) with `toolpdp pending`, the console
// and a notification, answers with `toolpdp confirm`, and the agent's wait
// ends within a second carrying the person's message.
func TestAskEndToEnd(t *testing.T) {
	bundle := testkit.WriteBundle(t, map[string]string{
		".manifest":        `{"revision": "e2e", "roots": ["agents"]}`,
		"agents/data.json": `{"asker": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}}`,
	})
	const aliceToken = "alice-approver-token-e2e-0123456789"
	const notifyKey = "notify-key-e2e-0123456789"
	dir := testkit.WriteBundle(t, map[string]string{"alice.token": aliceToken + "\n", "notify.key": notifyKey, "agent.token": "agent-workspace-token-0123456789"})

	got := make(chan *http.Request, 10)
	bodies := make(chan []byte, 10)
	rx := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	})}
	rl := listenLoopback(t)
	go func() { _ = rx.Serve(rl) }()
	t.Cleanup(func() { rx.Close() })

	sock := filepath.Join(dir, "agent.sock")
	p := start(t, "serve", "--bundle", bundle, "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off",
		"--confirm-listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--approver-token-file", filepath.Join(dir, "alice.token"),
		"--notify-url", "http://"+rl.Addr().String()+"/hook", "--notify-secret-file", filepath.Join(dir, "notify.key"),
		"--console-url", "https://console.example")
	conn := dialUnix(t, sock)
	waitServing(t, conn, p)
	approverAddr := listenAddr(t, p, "serving the approver (")
	consoleAddr := listenAddr(t, p, "serving the approvers' console")
	agent := pb.NewDecisionServiceClient(conn)
	ctx := context.Background()

	args, _ := structpb.NewStruct(map[string]any{"file_path": "/srv/app/deploy.sh", "content": "curl -H 'Authorization: token " + plantedSecret + "' https://api.example\u202E\x1b[2K"})
	ask, err := agent.Decide(ctx, &pb.DecideRequest{AgentId: "asker", SessionId: "s1", ToolName: "Write", CallId: "toolu_01", Args: args})
	if err != nil || ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Decide: %v %v", ask, err)
	}

	// The notification: signed, the secret masked.
	select {
	case r := <-got:
		body := <-bodies
		if !notify.Verify([]byte(notifyKey), body, r.Header.Get(notify.SignatureHeader)) {
			t.Errorf("the notification's signature %q does not verify", r.Header.Get(notify.SignatureHeader))
		}
		if strings.Contains(string(body), plantedSecret) || !strings.Contains(string(body), ask.DecisionId) || !strings.Contains(string(body), "https://console.example/#ask-") {
			t.Errorf("notification:\n%s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification arrived\n%s", p.stderr.String())
	}

	// `toolpdp pending`: the whole call, masked, hidden characters escaped.
	tokenFile := filepath.Join(dir, "alice.token")
	out, err := exec.Command(binary(t), "pending", "--addr", approverAddr, "--token-file", tokenFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ask.DecisionId) || !strings.Contains(string(out), "/srv/app/deploy.sh") || !strings.Contains(string(out), `\u202E`) ||
		strings.Contains(string(out), plantedSecret) || strings.Contains(string(out), "\x1b") || !strings.Contains(string(out), "secrets masked: args.content") {
		t.Fatalf("pending: %v\n%s", err, out)
	}
	out, err = exec.Command(binary(t), "pending", "--addr", approverAddr, "--token-file", tokenFile, "--reveal", "--format", "json").Output()
	if err != nil || !strings.Contains(string(out), plantedSecret) {
		t.Fatalf("pending --reveal --format json: %v\n%s", err, out)
	}
	// No token, or the agent's: refused.
	for _, tf := range []string{"", filepath.Join(dir, "agent.token")} {
		cmd := exec.Command(binary(t), "pending", "--addr", approverAddr)
		if tf != "" {
			cmd.Args = append(cmd.Args, "--token-file", tf)
		}
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Unauthenticated") {
			t.Errorf("pending with token file %q: %v\n%s", tf, err, out)
		}
	}

	// The console: 401 without a token; with one, the call masked.
	resp, err := http.Get("http://" + consoleAddr + "/api/pending")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("console without a token: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", "http://"+consoleAddr+"/api/pending", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("console with a token: %v %v", resp, err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(page), plantedSecret) || !strings.Contains(string(page), ask.DecisionId) {
		t.Errorf("console /api/pending:\n%s", page)
	}
	// The console's API reads strictly: a body that is an allow to one
	// reader and a deny to another is refused, and the ask stays open
	// (it is answered below).
	req, _ = http.NewRequest("POST", "http://"+consoleAddr+"/api/confirm",
		strings.NewReader(`{"decision_id":"`+ask.DecisionId+`","result":"deny","RESULT":"allow"}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(page), `RESULT: the key \"RESULT\" equals the key \"result\" ignoring case`) {
		t.Fatalf("console confirm with a case-variant key: %d %s", resp.StatusCode, page)
	}

	// The agent waits; `toolpdp confirm` answers; the wait ends within a second.
	type awaited struct {
		r   *pb.AwaitDecisionResponse
		err error
		at  time.Time
	}
	done := make(chan awaited, 1)
	go func() {
		r, err := agent.AwaitDecision(ctx, &pb.AwaitDecisionRequest{CallId: "toolu_01", AgentId: "asker", SessionId: "s1", WaitSeconds: 60})
		done <- awaited{r, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the agent is waiting
	out, err = exec.Command(binary(t), "confirm", ask.DecisionId, "deny", "--message", "Use the staging copy instead.", "--addr", approverAddr, "--token-file", tokenFile).CombinedOutput()
	confirmed := time.Now()
	if err != nil || !strings.Contains(string(out), "denied") {
		t.Fatalf("confirm: %v\n%s", err, out)
	}
	select {
	case w := <-done:
		if w.err != nil || w.r.State != pb.AskState_ASK_STATE_ANSWERED || w.r.Decision != pb.Decision_DECISION_DENY || w.r.Message != "Use the staging copy instead." {
			t.Fatalf("AwaitDecision: %v %v", w.r, w.err)
		}
		t.Logf("the agent's wait ended %v after `toolpdp confirm` exited", w.at.Sub(confirmed))
	case <-time.After(time.Second):
		t.Fatal("AwaitDecision did not return within 1 s of the answer")
	}
	// The answer's notification says who answered.
	select {
	case <-got:
		body := <-bodies
		if !strings.Contains(string(body), `"event":"answer"`) || !strings.Contains(string(body), "alice (approver token)") {
			t.Errorf("answer notification:\n%s", body)
		}
	case <-time.After(10 * time.Second):
		t.Error("no notification of the answer")
	}

	// An allow by call id, as JSON.
	ask2, _ := agent.Decide(ctx, &pb.DecideRequest{AgentId: "asker", SessionId: "s1", ToolName: "Write", CallId: "toolu_02", Args: args})
	out, err = exec.Command(binary(t), "confirm", "--call-id", "toolu_02", "--agent-id", "asker", "--session-id", "s1", "allow", "--format", "json",
		"--addr", approverAddr, "--token-file", tokenFile).Output()
	if err != nil || !strings.Contains(string(out), "DECISION_ALLOW") {
		t.Fatalf("confirm --call-id: %v\n%s", err, out)
	}
	if w, err := agent.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: ask2.DecisionId}); err != nil || w.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("after the allow: %v %v", w, err)
	}
}

// A TCP approver address without approver tokens refuses to start.
func TestApproverAddressNeedsAToken(t *testing.T) {
	for _, flag := range []string{"--confirm-listen", "--console-listen"} {
		sock := filepath.Join(t.TempDir(), "s.sock")
		out, err := exec.Command(binary(t), "serve", "--listen", "unix://"+sock, "--metrics-listen", "", flag, "127.0.0.1:0").CombinedOutput()
		if code := processExit(err); code != 2 || !strings.Contains(string(out), "--approver-token-file") {
			t.Errorf("%s on TCP without a token: exit %d\n%s", flag, code, out)
		}
	}
}

func processExit(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}
