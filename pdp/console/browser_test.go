package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/server"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

const secret = "ghp_consoleSECRETconsoleSECRET0123456789"

// commandSecret is a password given to mysql on its command line: no shape
// of a token, found only by reading the command.
const commandSecret = "S3cretPassw0rd"

// chromium is Debian's browser, which CI installs; the test does not skip
// without it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: apt-get install chromium (.ci/run does)")
	return ""
}

// A person logs in to the console in a real browser, sees an ask arrive
// without reloading, reads it masked (the secret shown only on request,
// hidden characters escaped), and denies it with a message; the agent's
// AwaitDecision returns that message.
func TestConsoleInABrowser(t *testing.T) {
	bin := chromium(t)
	dir := testkit.WriteBundle(t, map[string]string{
		".manifest":        `{"revision": "console", "roots": ["agents"]}`,
		"agents/data.json": `{"asker": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}}`,
	})
	const token = "alice-console-token-0123456789"
	tokDir := testkit.WriteBundle(t, map[string]string{"alice.token": token})
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := server.New(ctx, server.Config{Listen: []string{"unix://" + sock}, ConsoleListen: []string{"127.0.0.1:0"},
		ApproverTokens: []string{filepath.Join(tokDir, "alice.token")}, Engine: pdp.Config{Bundles: []string{dir}, EvalTimeout: testkit.EvalTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	consoleURL := "http://" + s.Addrs("--console-listen")[0].String()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	agent := pb.NewDecisionServiceClient(conn)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.Flag("headless", true), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(profileDir(t)))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	bctx, tcancel := context.WithTimeout(bctx, 90*time.Second)
	defer tcancel()

	// Without a token: the login page, 401.
	var loginShown bool
	if err := chromedp.Run(bctx,
		chromedp.Navigate(consoleURL),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.Evaluate(`document.querySelector("form[action='/login']") !== null`, &loginShown),
	); err != nil || !loginShown {
		t.Fatalf("login page: %v %v", loginShown, err)
	}
	if err := chromedp.Run(bctx,
		chromedp.SendKeys("#token", "not-the-token-0123456789", chromedp.ByID),
		chromedp.Click("#login", chromedp.ByID),
		chromedp.WaitVisible("#login-error", chromedp.ByID),
		chromedp.SendKeys("#token", token, chromedp.ByID),
		chromedp.Click("#login", chromedp.ByID),
		chromedp.WaitVisible("#empty", chromedp.ByID),
		chromedp.WaitReady(`//span[@id="live" and text()="live"]`),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}

	// The ask arrives while the page is open.
	args, _ := structpb.NewStruct(map[string]any{"file_path": "/srv/notes.txt", "content": "hello\u202Edlrow " + secret + "\x1b[8m"})
	ask, err := agent.Decide(ctx, &pb.DecideRequest{AgentId: "asker", SessionId: "s1", ToolName: "Write", CallId: "toolu_9", Args: args})
	if err != nil || ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Decide: %v %v", ask, err)
	}
	card := "#ask-" + ask.DecisionId
	var shown, page string
	if err := chromedp.Run(bctx,
		chromedp.WaitVisible(card, chromedp.ByQuery),
		chromedp.Text(card+" .arguments", &shown, chromedp.ByQuery),
		chromedp.Text("body", &page, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("the ask did not appear: %v", err)
	}
	if strings.Contains(page, secret) || !strings.Contains(shown, "[REDACTED]") || !strings.Contains(shown, `\u202E`) || strings.Contains(shown, "\u202E") || !strings.Contains(page, "toolu_9") {
		t.Fatalf("the ask as shown:\n%s", shown)
	}
	// The secret only on request.
	if err := chromedp.Run(bctx,
		chromedp.Click(card+" .reveal", chromedp.ByQuery),
		chromedp.WaitVisible(`//pre[contains(@class,"arguments") and contains(text(),"`+secret+`")]`),
	); err != nil {
		t.Fatalf("reveal: %v", err)
	}

	// The agent waits; the person denies with a message.
	type awaited struct {
		r   *pb.AwaitDecisionResponse
		err error
	}
	waited := make(chan awaited, 1)
	go func() {
		r, err := agent.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId, WaitSeconds: 60})
		waited <- awaited{r, err}
	}()
	if err := chromedp.Run(bctx,
		chromedp.SendKeys(card+" .deny-message", "Write to /srv/staging instead.", chromedp.ByQuery),
		chromedp.Click(card+" .deny", chromedp.ByQuery),
	); err != nil {
		t.Fatalf("deny: %v", err)
	}
	select {
	case w := <-waited:
		if w.err != nil || w.r.State != pb.AskState_ASK_STATE_ANSWERED || w.r.Decision != pb.Decision_DECISION_DENY || w.r.Message != "Write to /srv/staging instead." {
			t.Fatalf("AwaitDecision: %v %v", w.r, w.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's wait did not end after the person answered")
	}
	if err := chromedp.Run(bctx, chromedp.WaitVisible("#empty", chromedp.ByID)); err != nil {
		t.Fatalf("the answered ask stays listed: %v", err)
	}

	// A password a program takes as an argument is masked, the rest of its command readable.
	cmdArgs, _ := structpb.NewStruct(map[string]any{"command": "env X=1 mysql -uroot -p" + commandSecret + " db"})
	cmdAsk, err := agent.Decide(ctx, &pb.DecideRequest{AgentId: "asker", SessionId: "s1", ToolName: "Bash", Args: cmdArgs})
	if err != nil || cmdAsk.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Decide: %v %v", cmdAsk, err)
	}
	var cmdShown string
	if err := chromedp.Run(bctx,
		chromedp.WaitVisible("#ask-"+cmdAsk.DecisionId, chromedp.ByQuery),
		chromedp.Text("#ask-"+cmdAsk.DecisionId+" .arguments", &cmdShown, chromedp.ByQuery),
		chromedp.Text("body", &page, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("the command's ask did not appear: %v", err)
	}
	if strings.Contains(page, commandSecret) || !strings.Contains(cmdShown, "mysql -uroot -p[REDACTED] db") {
		t.Fatalf("the command's ask as shown:\n%s", cmdShown)
	}
}

// profileDir is the browser's profile directory, removed after the test;
// Chromium's helper processes may still write into it for a moment after
// the browser itself has exited, which t.TempDir's cleanup reports as a
// failure.
func profileDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "console-browser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("the browser's profile %s could not be removed", dir)
	})
	return dir
}
