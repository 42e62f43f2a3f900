package pdp

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// commandSecrets are passwords programs take as arguments, one per row of
// the secret_arguments table and through wrappers, shell scripts and
// here-strings: the secret, the command, and a word of it that stays
// readable.
var commandSecrets = []struct{ secret, cmd, kept string }{
	{"S3cretPassw0rd", `mysql -uroot -pS3cretPassw0rd db`, "-uroot"},
	{"TopSecret!23", `sshpass -p 'TopSecret!23' ssh host`, "ssh host"},
	{"Pa55wordXyz", `curl -u alice:Pa55wordXyz https://api.example.com`, "alice:"},
	{"wJalrXUtnFEMIK7MDENG", `aws configure set aws_secret_access_key wJalrXUtnFEMIK7MDENG`, "aws_secret_access_key"},
	{"Dump3rPw", `mysqldump --password=Dump3rPw app`, "mysqldump"},
	{"Pr0xyPw", `curl --proxy-user p:Pr0xyPw https://x.example`, "--proxy-user"},
	{"HttpPw2", `wget --http-password HttpPw2 https://x.example`, "wget"},
	{"RedisPw9", `redis-cli -a RedisPw9 ping`, "ping"},
	{"MongoPw7", `mongosh -p MongoPw7 mongodb://db`, "mongosh"},
	{"LdapPw5", `ldapsearch -x -w LdapPw5 -b dc=x`, "ldapsearch"},
	{"HtPw44", `htpasswd -bc .htpasswd alice HtPw44`, "alice"},
	{"DockPw1", `docker login -u me -p DockPw1 registry.example`, "registry.example"},
	{"HelmPw2", `helm repo add --password HelmPw2 r https://charts.example`, "charts.example"},
	{"OsslPw3", `openssl rsa -in k.pem -passin pass:OsslPw3`, "k.pem"},
	{"SmbPw4", `smbclient //h/s -U alice%SmbPw4`, "//h/s"},
	{"PgPw5x", `PGPASSWORD=PgPw5x psql -h db`, "psql -h db"},
	{"GitPw6", `git config --global user.password GitPw6`, "user.password"},
	{"KubePw7", `kubectl create secret generic s --from-literal=api=KubePw7`, "--from-literal=api="},
	{"EnvWrapped1", `env X=1 mysql -pEnvWrapped1`, "env X=1"},
	{"Timeout2x", `timeout 5 sshpass -p Timeout2x ssh h`, "timeout 5"},
	{"BashC3", `bash -c 'curl -u a:BashC3 https://x.example'`, "bash -c"},
	{"HereStr4", `bash <<< 'redis-cli -a HereStr4 ping'`, "bash <<<"},
	{"Escaped pw5", `redis-cli -a Escaped\ pw5 ping`, "redis-cli"},
	{"Sshp4ssEnv", `SSHPASS=Sshp4ssEnv sshpass -e ssh h`, "sshpass -e ssh h"},
	// Grouped short options, values written in parts, commands that do not
	// parse, eval, and programs of the table's later rows.
	{"GroupCurl1", `curl -fsSLu alice:GroupCurl1 https://api.example.com`, "https://api.example.com"},
	{"GroupMy2", `mysql -vpGroupMy2 db`, "mysql -v"},
	{"GroupLdap3", `ldapsearch -LLLxw GroupLdap3 -b dc=x`, "-b dc=x"},
	{"PartsPw4x", `mysql -p"PartsPw4"x db`, "mysql -p"},
	{"aPartsPw5", `sshpass -p a'PartsPw5' ssh h`, "ssh h"},
	{"xPartsPw6", `curl -u a:"x"'PartsPw6' https://x.example`, "https://x.example"},
	{"Unparsed7", `mysql -uroot -pUnparsed7 db '`, "-uroot"},
	{"Unparsed8", `bash -c 'curl -u a:Unparsed8 https://x.example`, "https://x.example"},
	{"EvalPw9", `eval 'mysql -pEvalPw9 db'`, "eval"},
	{"KeygenPw1", `ssh-keygen -q -N KeygenPw1 -f k`, "-f k"},
	{"RabbitPw2", `rabbitmqctl add_user alice RabbitPw2`, "alice"},
	{"VaultTok3", `vault login VaultTok3`, "vault login"},
	{"CertPw4", `curl -E cert.pem:CertPw4 https://x.example`, "cert.pem:"},
	{"VarPw6x", `pw=VarPw6x; mysql -p"$pw" db`, "mysql -p"},
}

// loggedEngine is an engine on the bundle in dir whose decision log is out.
func loggedEngine(t *testing.T, dir string) (*Engine, *decisionlog.Log, *testkit.SyncBuffer) {
	t.Helper()
	var out testkit.SyncBuffer
	dlog, err := decisionlog.New(decisionlog.Config{Writer: &out, QueueSize: 100, Block: true, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return loadedEngine(t, Config{Bundles: []string{dir}, Logger: quietLog, EvalTimeout: 10 * time.Second, MaxSessions: 10, MaxPending: 100, DecisionLog: dlog}), dlog, &out
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestCommandSecretsMaskedEverywhere decides each command as an ask and
// finds its secret in no decision-log line and no rendering of the ask (what
// the console, toolpdp pending and notifications show), while the rest of
// the command stays readable.
func TestCommandSecretsMaskedEverywhere(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"default": {"tools": [{"type": "agent_toolset", "configs": [{"name": "Bash", "permission_policy": {"type": "always_ask"}}]}]}}`,
	})
	e, dlog, out := loggedEngine(t, dir)
	for _, c := range commandSecrets {
		resp := decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": c.cmd})})
		if resp.Decision != pb.Decision_DECISION_ASK {
			t.Fatalf("%s: %v, want an ask", c.cmd, resp.Decision)
		}
	}
	asks, _, err := e.ShowPending(context.Background(), "", &pb.ListPendingRequest{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(asks) != len(commandSecrets) {
		t.Fatalf("%d asks shown, want %d", len(asks), len(commandSecrets))
	}
	var shown strings.Builder
	for _, a := range asks {
		shown.WriteString(protojson.Format(a))
	}
	dlog.Close()
	logged := out.String()
	masked := 0
	for _, c := range commandSecrets {
		// The secret as bash reads it, and as the JSON of a line or a view writes it.
		spellings := []string{c.secret, strings.ReplaceAll(c.secret, " ", `\ `), strings.ReplaceAll(c.secret, `!`, `\u0021`)}
		leaked := false
		for _, s := range spellings {
			for where, text := range map[string]string{"decision log": logged, "ask view": shown.String()} {
				if strings.Contains(text, s) {
					t.Errorf("%s: the %s holds %q", c.cmd, where, s)
					leaked = true
				}
			}
		}
		if !leaked {
			masked++
		}
		for where, text := range map[string]string{"decision log": logged, "ask view": shown.String()} {
			if !strings.Contains(text, c.kept) && !strings.Contains(text, strings.ReplaceAll(c.kept, `"`, `\"`)) {
				t.Errorf("%s: the %s lacks %q, which is no secret", c.cmd, where, c.kept)
			}
		}
	}
	t.Logf("masked %d/%d", masked, len(commandSecrets))
}

// TestBundleAddsSecretArguments: a bundle's guardrails add programs to the
// table, validated strictly at load.
func TestBundleAddsSecretArguments(t *testing.T) {
	agents := `{"default": {"tools": [{"type": "agent_toolset", "configs": [{"name": "Bash", "permission_policy": {"type": "always_ask"}}]}]}}`
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json":     agents,
		"guardrails/data.json": `{"ask_commands": ["git push"], "secret_arguments": {"frobctl": [{"option": "--key-phrase"}], "mysql": [{"option": "--login-token"}]}}`,
	})
	e, dlog, out := loggedEngine(t, dir)
	for _, cmd := range []string{`frobctl --key-phrase Fr0bSecret deploy`, `mysql --login-token T0kenAdded -pLibRow1 db`} {
		decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": cmd})})
	}
	dlog.Close()
	for _, s := range []string{"Fr0bSecret", "T0kenAdded", "LibRow1"} {
		if strings.Contains(out.String(), s) {
			t.Errorf("the decision log holds %q", s)
		}
	}
	if !strings.Contains(out.String(), "frobctl --key-phrase [REDACTED] deploy") {
		t.Errorf("the rest of the command is not kept:\n%s", out.String())
	}

	bad := testkit.WriteBundle(t, map[string]string{
		"agents/data.json":     agents,
		"guardrails/data.json": `{"secret_arguments": {"frobctl": [{"optoin": "-k"}]}}`,
	})
	b, err := New(Config{Bundles: []string{bad}, Logger: quietLog, EvalTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Reload(context.Background(), true)
	if err == nil || !strings.Contains(err.Error(), "guardrails.secret_arguments") || !strings.Contains(err.Error(), "optoin") {
		t.Errorf("a misspelt entry key: %v, want an error naming guardrails.secret_arguments and the key", err)
	}
}

// TestCommandSecretsCutInAMessage: a guardrail's message quotes the command
// cut short; a cut inside the password leaves nothing of it.
func TestCommandSecretsCutInAMessage(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json":     `{"default": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`,
		"guardrails/data.json": `{"ask_commands": ["mysql"]}`,
	})
	e, dlog, out := loggedEngine(t, dir)
	const pw = "CutS3cretPassw0rd108"
	// Long enough that the quote is cut somewhere inside the password.
	var asks []*pb.DecideResponse
	for pad := 150; pad < 200; pad++ {
		cmd := `mysql -uroot -e "SELECT ` + strings.Repeat("c", pad) + `" -p` + pw + ` db`
		asks = append(asks, decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": cmd})}))
	}
	shown, _, err := e.ShowPending(context.Background(), "", &pb.ListPendingRequest{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	dlog.Close()
	var views strings.Builder
	for _, a := range shown {
		views.WriteString(protojson.Format(a))
	}
	for where, text := range map[string]string{"decision log": out.String(), "ask view": views.String()} {
		for k := len(pw); k >= 6; k-- {
			if strings.Contains(text, pw[:k]) {
				t.Errorf("the %s holds %q of the password", where, pw[:k])
				break
			}
		}
	}
	if len(asks) == 0 || asks[0].Decision != pb.Decision_DECISION_ASK || !strings.Contains(out.String(), "…") {
		t.Fatalf("want asks whose messages quote the command cut short")
	}
}

// TestMaskingKeepsWhatIsNoSecret: options named like a secret that take
// none, and options of the same letter that mean something else.
func TestMaskingKeepsWhatIsNoSecret(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"default": {"tools": [{"type": "agent_toolset", "configs": [{"name": "Bash", "permission_policy": {"type": "always_ask"}}]}]}}`,
	})
	e, dlog, out := loggedEngine(t, dir)
	cmds := []string{
		`docker run -p 8080:80 nginx`, `mysql -u root -p db`, `mysql -P 3306 -h db.example`, `ssh -p 2222 host`,
		`docker login --password-stdin reg.example.com`, `mysql --skip-password db`, `gpg --passphrase-file pf --batch x`,
		`aws kms decrypt --key-id alias/x`, `rsync --password-file=/etc/pw src dst`, `mkdir -p a/b`, `git log -p`,
	}
	for _, cmd := range cmds {
		decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": cmd})})
	}
	dlog.Close()
	for _, cmd := range cmds {
		if !strings.Contains(out.String(), strings.ReplaceAll(cmd, `"`, `\"`)) {
			t.Errorf("%s: not logged as it is", cmd)
		}
	}
}

// TestCommandSecretsMaskedInConfirmations: a person's allow the policy in
// force overrules quotes the command; the confirmation line masks its
// secrets as the decision's did. Quoted and written-in-parts values too.
func TestCommandSecretsMaskedInConfirmations(t *testing.T) {
	files := map[string]string{
		"agents/data.json":     `{"default": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`,
		"guardrails/data.json": `{"ask_commands": ["mysql", "curl"]}`,
	}
	dir := testkit.WriteBundle(t, files)
	e, dlog, out := loggedEngine(t, dir)
	cmds := map[string]string{
		"Overruled1x": `mysql -uroot -pOverruled1x db`,
		"HomeParts2":  `mysql -uroot -p"HomeParts2$HOME" db`,
		"Ansic3pw":    `curl -u $'a:Ansic3pw\t' https://x.example`,
		"Abbrev4pw":   `mysql -uroot --passw=Abbrev4pw db`,
	}
	var asks []string
	for _, cmd := range cmds {
		resp := decide(t, e, "", &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": cmd})})
		if resp.Decision != pb.Decision_DECISION_ASK {
			t.Fatalf("%s: %v, want an ask", cmd, resp.Decision)
		}
		asks = append(asks, resp.DecisionId)
	}
	files["guardrails/data.json"] = `{"deny_commands": ["mysql", "curl"]}`
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Reload(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	for _, id := range asks {
		if _, err := e.Confirm(context.Background(), "", "alice", &pb.ConfirmRequest{DecisionId: id, Result: "allow"}); err != nil {
			t.Fatal(err)
		}
	}
	dlog.Close()
	if !strings.Contains(out.String(), `"overruled"`) {
		t.Fatalf("no overruled confirmation:\n%s", out.String())
	}
	for secret, cmd := range cmds {
		if strings.Contains(out.String(), secret) {
			t.Errorf("%s: the decision log holds %q", cmd, secret)
		}
	}
}
