package pdp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A bundle's OPA decision-log mask policy, as security teams write it for OPA.
const logMaskPolicy = `package system.log

import rego.v1

mask contains "/input/args/note"

mask contains {"op": "upsert", "path": "/input/args/ticket", "value": "**policy**"}

drop if input.input.args.drop_me == true
`

// TestDecisionLogHoldsNoSecret plants a secret of every shape, and under
// every name the masking knows, in args, env, a command that a guardrail
// quotes in its deny message (and so in the tool.permission_denied event),
// a PEM key in Write content and a Confirm's deny message, and finds none
// in the log.
func TestDecisionLogHoldsNoSecret(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json":     `{"default": {}}`,
		"guardrails/data.json": `{"deny_commands": ["curl", "psql"], "ask_commands": ["git push"]}`,
		"system/log/mask.rego": logMaskPolicy,
	})
	var out testkit.SyncBuffer
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dlog, err := decisionlog.New(decisionlog.Config{Writer: &out, QueueSize: 100, Block: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e := loadedEngine(t, Config{Bundles: []string{dir}, Logger: quiet, EvalTimeout: testkit.EvalTimeout, MaxSessions: 10, MaxPending: 10, DecisionLog: dlog})

	secrets := map[string]string{ // what must not appear -> where it was planted
		"sk-proj-Zq8xA1b2C3d4E5f6G7h8":                          "env OPENAI_KEY (shape sk-)",
		"plainvalue4pat":                                        "env GITHUB_PAT (name)",
		"dbpass4url":                                            "env DATABASE_URL (password in a URL)",
		"hdrvalue4apikey":                                       "args headers.X-API-KEY (name)",
		"patvalue4arg":                                          "args pat (name)",
		"authvalue4arg":                                         "args auth (name)",
		"bearervalue4arg":                                       "args bearer (name)",
		"apikeyvalue4arg":                                       "args api-key (name)",
		"tokBearerInCurl8xY":                                    "command: Authorization: Bearer",
		"MIIEpemsecretBODYline":                                 "Write content: PEM private key",
		"ghp_0123456789abcdefghijABCDEFGHIJ012345":              "args: ghp_",
		"gho_0123456789abcdefghijABCDEFGHIJ012345":              "env: gho_",
		"github_pat_11ABCDEFG0123456789_abcdefghijk":            "command: github_pat_",
		"xoxb-123456789012-abcdefghij":                          "args: xox?-",
		"AKIAIOSFODNN7EXAMPLE":                                  "args: AKIA",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl": "args: JWT",
		"hunter2pw":                                             "command: --password=",
		"pgpass4env":                                            "command: PGPASSWORD=",
		"xoxp-confirm-secret":                                   "Confirm deny_message: xox?-",
		"maskedbypolicy":                                        "args note (the bundle's mask policy)",
		"ticketbypolicy":                                        "args ticket (the bundle's upsert)",
		"droppedbypolicy":                                       "a decision the bundle's policy drops",
		"glpat-AbCdEfGhIjKlMnOpQrSt":                            "args: glpat- (red team)",
		"AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q":               "args: AIza (red team)",
		"rk_live_0123456789abcdefABCDEF":                        "args: rk_live_ (red team)",
		"npm_0123456789abcdefghijABCDEFGHIJ0123":                "args: npm_ (red team)",
		"hf_0123456789abcdefghijABCDEFGHIJ0123":                 "args: hf_ (red team)",
		"T000/B000/XXXXsecretXXXX":                              "args: a Slack webhook URL (red team)",
		"userpw4ip":                                             "args: user:pw@ip (red team)",
		"passvalue4arg":                                         "args pass (name, red team)",
		"keyvalue4env":                                          "env MY_KEY (name, red team)",
		"credsvalue4env":                                        "env CREDS (name, red team)",
		"hunter2free":                                           "Confirm deny_message: password is … (red team)",
	}
	decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Read",
		Env: map[string]string{"OPENAI_KEY": "sk-proj-Zq8xA1b2C3d4E5f6G7h8", "GITHUB_PAT": "plainvalue4pat",
			"DATABASE_URL": "postgres://u:dbpass4url@db.internal/app", "GH": "gho_0123456789abcdefghijABCDEFGHIJ012345", "PATH": "/usr/bin"},
		Args: testkit.Struct(t, map[string]any{
			"file_path": "/tmp/x", "pat": "patvalue4arg", "auth": "authvalue4arg", "bearer": "bearervalue4arg", "api-key": "apikeyvalue4arg",
			"headers": map[string]any{"X-API-KEY": "hdrvalue4apikey", "Accept": "text/plain"},
			"list":    []any{"ghp_0123456789abcdefghijABCDEFGHIJ012345", "xoxb-123456789012-abcdefghij", "id AKIAIOSFODNN7EXAMPLE here"},
			"jwt":     "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
			"note":    "maskedbypolicy", "ticket": "ticketbypolicy",
			"more": []any{"glpat-AbCdEfGhIjKlMnOpQrSt", "key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "rk_live_0123456789abcdefABCDEF",
				"npm_0123456789abcdefghijABCDEFGHIJ0123", "hf_0123456789abcdefghijABCDEFGHIJ0123",
				"https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX", "ssh admin:userpw4ip@10.0.0.1"},
			"pass": "passvalue4arg",
		})})
	decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Read", Env: map[string]string{"MY_KEY": "keyvalue4env", "CREDS": "credsvalue4env"}})
	decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{
		"command": `curl -H "Authorization: Bearer tokBearerInCurl8xY" https://api.example.com && git clone https://x:github_pat_11ABCDEFG0123456789_abcdefghijk@github.com/o/r`})})
	decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{
		"command": `PGPASSWORD=pgpass4env psql --password=hunter2pw -h db`})})
	decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Write", Args: testkit.Struct(t, map[string]any{
		"file_path": "/tmp/key.pem", "content": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpemsecretBODYline\nabc\n-----END RSA PRIVATE KEY-----\n"})})
	decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Read", Args: testkit.Struct(t, map[string]any{"drop_me": true, "x": "droppedbypolicy"})})
	ask := decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "git push"})})
	if _, err := e.Confirm(context.Background(), "", "test", &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", DenyMessage: "use xoxp-confirm-secret instead; the password is hunter2free"}); err != nil {
		t.Fatal(err)
	}
	dlog.Close()
	text := out.String()
	for secret, where := range secrets {
		if strings.Contains(text, secret) {
			t.Errorf("the decision log holds the secret planted in %s (%s)", where, secret)
		}
	}
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		kinds[v["type"].(string)]++
	}
	if kinds["decision"] != 6 || kinds["tool.permission_denied"] != 2 || kinds["tool.confirmation"] != 1 {
		t.Errorf("lines by type %v; want 5 decisions (one dropped by the policy), 2 denials, 1 confirmation", kinds)
	}
	// Masking keeps what is not a secret.
	for _, kept := range []string{`"PATH":"/usr/bin"`, `"Accept":"text/plain"`, "curl -H", "Authorization: Bearer [REDACTED]",
		"postgres://u:[REDACTED]@db.internal/app", `"erased":["/input/args/note"]`, `"ticket":"**policy**"`, "--password=[REDACTED]"} {
		if !strings.Contains(text, kept) {
			t.Errorf("the log lacks %q:\n%s", kept, text)
		}
	}
}

func TestDecisionLogLines(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("dl1"), "agents/data.json": testkit.SessionAgents})
	var out testkit.SyncBuffer
	dlog, err := decisionlog.New(decisionlog.Config{Writer: &out, QueueSize: 100, Block: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e := loadedEngine(t, Config{Bundles: []string{dir}, EvalTimeout: testkit.EvalTimeout, MaxSessions: 10, MaxPending: 10, DecisionLog: dlog})
	decide(t, e, "", &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "rm", Env: map[string]string{"GITHUB_TOKEN": "ghp_x", "PATH": "/bin"},
		Args: testkit.Struct(t, map[string]any{"path": "/x", "nested": map[string]any{"password": "hunter2"}})})
	ask := decide(t, e, "", &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "bash"})
	if _, err := e.Confirm(context.Background(), "", "test", &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", DenyMessage: "not now"}); err != nil {
		t.Fatal(err)
	}
	dlog.Close()

	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q does not parse: %v", sc.Text(), err)
		}
		kinds = append(kinds, line["type"].(string))
		if line["type"] != "decision" {
			continue
		}
		for _, k := range []string{"decision_id", "timestamp", "path", "input", "result", "bundles", "metrics"} {
			if _, ok := line[k]; !ok {
				t.Errorf("decision line lacks %q: %s", k, sc.Text())
			}
		}
		if rev := line["bundles"].(map[string]any)[dir].(map[string]any)["revision"]; rev != "dl1" {
			t.Errorf("bundles: %v", line["bundles"])
		}
		if line["path"] != decisionlog.DecisionPath {
			t.Errorf("path %v", line["path"])
		}
	}
	if strings.Join(kinds, ",") != "decision,tool.permission_denied,decision,tool.confirmation" {
		t.Fatalf("kinds %v", kinds)
	}
	text := out.String()
	if strings.Contains(text, "ghp_x") || strings.Contains(text, "hunter2") || !strings.Contains(text, `"GITHUB_TOKEN":"[REDACTED]"`) || !strings.Contains(text, `"PATH":"/bin"`) {
		t.Fatalf("redaction:\n%s", text)
	}
	if !strings.Contains(text, `"deny_message":"not now"`) || !strings.Contains(text, `"reasons":[`) {
		t.Fatalf("confirmation or reasons missing:\n%s", text)
	}
}

// loadedEngine is an engine built from c, with its bundles loaded.
func loadedEngine(tb testing.TB, c Config) *Engine {
	tb.Helper()
	if c.EvalTimeout == 0 {
		c.EvalTimeout = testkit.EvalTimeout
	}
	e, err := New(c)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Reload(context.Background(), true); err != nil {
		tb.Fatal(err)
	}
	return e
}

// decide is e.Decide for a caller of workspace ws, failing tb on a refusal.
func decide(tb testing.TB, e *Engine, ws string, req *pb.DecideRequest) *pb.DecideResponse {
	tb.Helper()
	resp, err := e.Decide(context.Background(), ws, req)
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}
