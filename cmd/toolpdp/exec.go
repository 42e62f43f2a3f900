package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/client"
	"github.com/toolpdp/toolpdp/confine"
	"github.com/toolpdp/toolpdp/confine/netproxy"
	"github.com/toolpdp/toolpdp/envguard/netrules"
	"github.com/toolpdp/toolpdp/pdp/server"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

const execSynopsis = `toolpdp exec --execution FILE|- [--report FILE] [--best-effort] [--decision ID --agent ID --session ID] (--command-b64 B64 | -- COMMAND [ARG]...)
       toolpdp exec --decision ID [--address ADDR] [--token-file FILE] [--report FILE] [--best-effort] (--command-b64 B64 | -- COMMAND [ARG]...)
       toolpdp exec --install-to DIR
       toolpdp exec --check [--format text|json]

Runs COMMAND confined by the kernel to an allowed call's execution (its
protojson, or a whole DecideResponse that allows): exactly its env (when
env_enforced) plus a private TMPDIR, in its cwd, writing only under
write_paths (protected names inside them read-only), reading only under
read_paths and the profile, no network when network is "none" — when it
is "rules", a network namespace with loopback only and a proxy at
127.0.0.1:3128 (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) where each new host is
decided by the sidecar at --address for the allow --decision names —, no new
privileges, every process it starts ended with it. It reports on stderr
(and --report as JSON) what it enforced and what it could not. Exit codes:
the command's; 126 when the kernel cannot enforce what the execution asks
for (unless --best-effort) or the run cannot start; 127 when COMMAND is
not found. --install-to copies this binary to DIR/toolpdp and exits: an
init container's way of handing it to the agent's container.

--decision takes the execution from the sidecar that decided the call
(GetExecution): once, for exactly the command decided, soon after the
decision; a refusal runs nothing (exit 126). --command-b64 is a shell
command, base64 (standard, padded), run by bash -c: the form a hook
rewrites a Bash call into, so that no quoting stands between what was
decided and what runs. --check runs a confined true to say whether this
machine can confine (exit 0) or not (exit 1), and what the kernel allows.`

func execCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if confine.IsChild() {
		// The run's own process: confine.Run started this binary again.
		if code := confine.Child(); code != 0 {
			return exitCode(code)
		}
		return nil
	}
	fs := newFlagSet("exec", stderr)
	withSynopsis(fs, execSynopsis)
	execution := fs.String("execution", "", "the allowed call's execution as protojson: a file, or - for stdin")
	report := fs.String("report", "", "also write the report as JSON to this file")
	bestEffort := fs.Bool("best-effort", false, "run even when the kernel cannot enforce a part the execution asks for (the report names each)")
	installTo := fs.String("install-to", "", "copy this binary to `DIR`/toolpdp (mode 0755) and exit")
	decision := fs.String("decision", "", "take the execution of this allow (its decision_id) from the sidecar that decided it")
	address := fs.String("address", envOr("TOOLPDP_ADDR", server.DefaultListen), "with --decision: the sidecar, host:port or unix:///path (env TOOLPDP_ADDR)")
	tokenFile := fs.String("token-file", os.Getenv("TOOLPDP_TOKEN_FILE"), "with --decision: file holding the workspace's bearer token (env TOOLPDP_TOKEN_FILE)")
	commandB64 := fs.String("command-b64", "", "the shell command to run with bash -c, base64 (standard encoding): instead of -- COMMAND")
	timeout := fs.Duration("timeout", 10*time.Second, "with --decision: bound on fetching the execution")
	check := fs.Bool("check", false, "say whether this kernel and node can confine a run (Landlock ABI, namespaces, seccomp) and exit: 0 when they can, 1 when not")
	format := formatFlag(fs, "text")
	var netOpts netFlags
	netOpts.register(fs, address, decision, tokenFile)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := format.valid(); err != nil {
		return err
	}
	argv := fs.Args()
	if *check {
		if *execution != "" || *decision != "" || len(argv) > 0 || *commandB64 != "" || *installTo != "" {
			return fmt.Errorf("%w: exec: --check takes no execution and no command", errUsage)
		}
		c := checkConfinement()
		if format.json() {
			if err := writeJSON(stdout, c); err != nil {
				return err
			}
		} else {
			c.writeText(stdout)
		}
		if !c.Available {
			return exitCode(1)
		}
		return nil
	}
	if *installTo != "" {
		if *execution != "" || *decision != "" || len(argv) > 0 || *commandB64 != "" {
			return fmt.Errorf("%w: exec: --install-to takes no execution and no command", errUsage)
		}
		return installSelf(*installTo, stdout)
	}
	command := ""
	switch {
	case *execution == "" && *decision == "":
		return fmt.Errorf("%w: exec: --execution or --decision is required", errUsage)
	case *commandB64 != "" && len(argv) > 0:
		return fmt.Errorf("%w: exec: --command-b64 and a command after -- are two commands: give one", errUsage)
	case *commandB64 != "":
		raw, err := base64.StdEncoding.DecodeString(*commandB64)
		if err != nil || !utf8.Valid(raw) || len(raw) == 0 {
			return fmt.Errorf("%w: exec: --command-b64: not the base64 of a command (%v)", errUsage, err)
		}
		command = string(raw)
	case len(argv) == 0:
		return fmt.Errorf("%w: exec: no command after --", errUsage)
	}
	// --decision alone takes the execution from the sidecar; beside an
	// inline --execution it names the allow the run's connections are
	// decided for (network rules).
	var spec execSpec
	var err error
	if *execution == "" {
		spec, err = fetchExecution(ctx, *address, *tokenFile, *timeout, &pb.GetExecutionRequest{DecisionId: *decision, Command: command, Argv: argv})
		if err == nil {
			spec.Cwd = agentCwd(spec.Spec)
		}
	} else {
		spec, err = readExecution(*execution, stdin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolpdp exec: %v\n", err)
		return exitCode(confine.ExitRefused)
	}
	spec.Argv = argv
	if command != "" {
		spec.Argv = []string{"bash", "-c", command}
	}
	if spec.NetRules != nil {
		proxy, closeProxy, err := netOpts.proxy(spec.NetRules, strings.Join(spec.Argv, " "), stderr)
		if err != nil {
			fmt.Fprintf(stderr, "toolpdp exec: %v\n", err)
			return exitCode(confine.ExitRefused)
		}
		defer closeProxy()
		spec.Proxy = proxy
	}
	if *execution == "-" {
		stdin = eofReader{} // the execution was stdin
	}
	rep, code := confine.Run(spec.Spec, confine.Options{BestEffort: *bestEffort}, stdin, stdout, stderr)
	if p, ok := spec.Proxy.(*netproxy.Proxy); ok {
		hosts := p.Records()
		rep.NetworkHosts = hosts
		allowed := 0
		for _, h := range hosts {
			if h.Decision == "allow" {
				allowed++
			}
		}
		fmt.Fprintf(stderr, "toolpdp exec: network: %d hosts decided, %d allowed, %d refused\n", len(hosts), allowed, len(hosts)-allowed)
	}
	if *report != "" {
		if err := os.WriteFile(*report, rep.JSON(), 0o600); err != nil {
			fmt.Fprintf(stderr, "toolpdp exec: --report: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// fetchExecution asks the sidecar at addr for the execution of the allow
// req names, for exactly req's command; any refusal runs nothing.
func fetchExecution(ctx context.Context, addr, tokenFile string, timeout time.Duration, req *pb.GetExecutionRequest) (execSpec, error) {
	conn, err := grpc.NewClient(client.Target(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return execSpec{}, fmt.Errorf("--address %s: %w", addr, err)
	}
	defer conn.Close()
	if tokenFile != "" {
		raw, err := os.ReadFile(tokenFile)
		if err != nil {
			return execSpec{}, fmt.Errorf("--token-file: %w", err)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(raw)))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ex, err := pb.NewDecisionServiceClient(conn).GetExecution(ctx, req)
	if err != nil {
		st := grpcstatus.Convert(err)
		return execSpec{}, fmt.Errorf("the sidecar at %s gave no execution for decision %s (%s: %s); nothing was run", addr, req.GetDecisionId(), st.Code(), st.Message())
	}
	return specOf(ex)
}

// agentCwd is where a run under a fetched execution starts: the agent's
// own working directory (this process's) when it lies inside the scopes,
// as the agent's shell would have run the command there; else the pinned
// cwd.
func agentCwd(spec confine.Spec) string {
	wd, err := os.Getwd()
	if err != nil {
		return spec.Cwd
	}
	if r, err := filepath.EvalSymlinks(wd); err == nil {
		wd = r
	}
	for _, roots := range []*[]string{spec.WritePaths, spec.ReadPaths} {
		if roots == nil {
			continue
		}
		for _, root := range *roots {
			if wd == root || strings.HasPrefix(wd, strings.TrimSuffix(root, "/")+"/") {
				return wd
			}
		}
	}
	return spec.Cwd
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// readExecution reads an execution (or a DecideResponse that allows) as
// protojson; an unknown field is an error, not a part left out.
func readExecution(name string, stdin io.Reader) (execSpec, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 16<<20))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return execSpec{}, fmt.Errorf("--execution: %w", err)
	}
	ex := &pb.Execution{}
	if err := protojson.Unmarshal(b, ex); err != nil {
		resp := &pb.DecideResponse{}
		if err2 := protojson.Unmarshal(b, resp); err2 != nil {
			return execSpec{}, fmt.Errorf("--execution %s: neither an Execution (%v) nor a DecideResponse (%v)", name, err, err2)
		}
		if resp.GetDecision() != pb.Decision_DECISION_ALLOW {
			return execSpec{}, fmt.Errorf("--execution %s: the decision is %v, not an allow", name, resp.GetDecision())
		}
		if ex = resp.GetExecution(); ex == nil {
			ex = &pb.Execution{}
		}
	}
	return specOf(ex)
}

// execSpec is a run's spec and, when its network is decided per
// connection, the rules its proxy needs.
type execSpec struct {
	confine.Spec
	NetRules *netrules.Rules
}

func specOf(ex *pb.Execution) (execSpec, error) {
	s := execSpec{Spec: confine.Spec{Env: ex.GetEnv(), EnvEnforced: ex.GetEnvEnforced(), Cwd: ex.GetCwd(),
		ReadOnlyNames: ex.GetReadOnlyNames(), UnreadableNames: ex.GetUnreadableNames()}}
	if r := ex.GetReadPaths(); r != nil {
		paths := r.GetPaths()
		s.ReadPaths = &paths
	}
	if w := ex.GetWritePaths(); w != nil {
		paths := w.GetPaths()
		s.WritePaths = &paths
	}
	switch ex.GetNetwork() {
	case "none":
		s.NoNetwork = true
	case "", "any":
	case "rules":
		nr := ex.GetNetworkRules()
		if nr == nil {
			return s, errors.New(`execution.network_rules: required when network is "rules"`)
		}
		rules, err := netrules.Parse(nr.GetAllow(), nr.GetAsk(), nr.GetDeny(), nr.GetOtherwise(), nr.GetPrivate()...)
		if err != nil {
			return s, fmt.Errorf("execution.network_rules.%w", err)
		}
		s.NetRules = rules
	default:
		return s, errors.New("execution.network: " + fmt.Sprintf("%q is not \"none\", \"any\", \"rules\" or empty", ex.GetNetwork()))
	}
	return s, nil
}

// installSelf copies the running binary to dir/toolpdp, whole or not at
// all (a temporary file renamed into place).
func installSelf(dir string, stdout io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".toolpdp-*")
	if err != nil {
		return fmt.Errorf("--install-to: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("--install-to: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	dst := filepath.Join(dir, "toolpdp")
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("--install-to: %w", err)
	}
	fmt.Fprintf(stdout, "installed %s\n", dst)
	return nil
}
