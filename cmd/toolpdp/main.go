// Command toolpdp is the policy decision point for AI-agent tool calls:
//
//	toolpdp serve  [--bundle PATH]... [--listen ADDR]...   run the gRPC sidecar
//	toolpdp check  PATH...                                 validate bundles
//	toolpdp test   PATH...                                 run bundles' _test.rego
//	toolpdp decide [--bundle PATH]...                      decide one request from stdin
//	toolpdp status [--addr ADDR]                           ask a running server what it serves
//	toolpdp pending [--addr ADDR]                          list the asks waiting for a person, each in full
//	toolpdp confirm ID allow|deny [--message M]            answer one
//	toolpdp fmt    [--check] [--diff] PATH...              format the bundles' Rego as opa fmt does
//	toolpdp replay --bundle PATH... LOG...                 diff a candidate bundle against logged decisions
//	toolpdp hook claude-code [--addr ADDR]                 answer one Claude Code hook event from stdin
//	toolpdp version                                        toolpdp's, Go's and OPA's versions
//
// --help, -h and help print the usage and exit 0. Exit codes (as Cerbos's):
// 0 success; 1 a runtime failure; 2 bad usage; 3 a bundle that does not
// compile or validate; 4 failing tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/toolpdp/toolpdp/pdp/server"
)

const usage = `usage:
  toolpdp serve  [--bundle PATH|URL]... [--listen ADDR]... [flags]   run the gRPC sidecar (flags also from TOOLPDP_<FLAG>)
  toolpdp check  [--strict] PATH...                               validate bundles (Rego and agent definitions)
  toolpdp test   [-v] [--run REGEX] [--coverage] PATH...          run the bundles' _test.rego and *.decisions.json/.yaml files
  toolpdp decide [--bundle PATH]...                               decide one DecideRequest (JSON on stdin)
  toolpdp status [--addr ADDR]                                    a running server's policy revision and last reload error
  toolpdp pending [--addr ADDR] [--token-file F] [--reveal]       the asks waiting for a person, each call in full
  toolpdp confirm ID allow|deny [--message M] [--remember]        answer one (or --call-id C --agent-id A --session-id S)
  toolpdp state accept-reset [--addr ADDR] [--token-file F]       accept that the state store lost its data
  toolpdp fmt    [--check] [--diff] PATH...                       format the bundles' Rego as opa fmt does
  toolpdp replay --bundle PATH... LOG...                          which logged decisions a candidate bundle would change
  toolpdp hook claude-code [--addr ADDR] [--agent-id ID]          answer one Claude Code hook event (JSON on stdin)
  toolpdp mcp-proxy --agent-id A --server-name S -- COMMAND...   govern an MCP server: calls decided, tools/list filtered, asks held
  toolpdp mcp pin --agent-id A --server-name S [--write F] -- CMD  pin an MCP server's tool definitions (mcp_servers[].tools)
  toolpdp exec --execution FILE|- [--report FILE] -- COMMAND...    run an allowed command confined to its execution's scopes
  toolpdp version                                                 toolpdp's, Go's and OPA's versions
  toolpdp help [COMMAND]                                          this text, or a command's flags
A PATH is a bundle directory or an opa build .tar.gz; serve also takes the
http(s):// URL of a bundle server (OPA's bundle protocol, with credentials).
Run 'toolpdp COMMAND --help' for a command's flags.
`

// errUsage marks a usage error: exit code 2. The server's own (a Config
// no server is built from) is the same error.
var errUsage = server.ErrUsage

// Exit codes besides 0, 1 and 2.
const (
	exitInvalid     = 3 // a bundle does not compile or validate
	exitTestsFailed = 4 // a bundle's tests fail
)

// codedError makes main print err and exit with code.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// invalidBundle marks an error reading, validating or compiling a bundle
// as exit code 3; a path that cannot be opened stays a runtime failure.
func invalidBundle(err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	return codedError{exitInvalid, err}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	var code exitCode
	var coded codedError
	switch {
	case err == nil:
	case errors.As(err, &code): // the command has printed what it had to
		os.Exit(int(code))
	case errors.As(err, &coded):
		fmt.Fprintln(os.Stderr, "toolpdp:", err)
		os.Exit(coded.code)
	case errors.Is(err, flag.ErrHelp): // help was asked for and printed
	case err == errUsage: // the usage is printed already
		os.Exit(2)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "toolpdp:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "toolpdp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmds := map[string]func(context.Context, []string, io.Reader, io.Writer, io.Writer) error{
		"serve": serve, "check": check, "test": test, "decide": decide, "status": status, "pending": pending, "confirm": confirm, "replay": replay,
		"hook": hook, "version": version, loadChildCommand: loadChild, "fmt": fmtCmd, "mcp-proxy": mcpProxy, "mcp": mcpCmd,
		"exec": execCmd, "state": stateCmd,
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" {
			if cmd, ok := cmds[args[1]]; ok {
				return cmd(ctx, append(args[2:], "--help"), stdin, stdout, stdout)
			}
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "toolpdp: unknown command %q\n%s", args[0], usage)
		return errUsage
	}
	return cmd(ctx, args[1:], stdin, stdout, stderr)
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("toolpdp "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// withSynopsis makes fs's usage start with a synopsis line (and what
// follows it) before the flags.
func withSynopsis(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
}

// fromEnv sets every flag of fs not given on the command line from the
// environment variable TOOLPDP_<FLAG> (--metrics-listen:
// TOOLPDP_METRICS_LISTEN) when it is set: the flag wins. A repeatable flag
// takes a comma-separated list. Call it after parsing.
func fromEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := EnvName(f.Name)
		v := getenv(name)
		if given[f.Name] || v == "" || err != nil {
			return
		}
		values := []string{v}
		if _, repeatable := f.Value.(*listFlag); repeatable {
			values = strings.Split(v, ",")
		}
		for _, one := range values {
			if e := fs.Set(f.Name, strings.TrimSpace(one)); e != nil {
				err = fmt.Errorf("%w: %s=%q: %v", errUsage, name, v, e)
				return
			}
		}
	})
	return err
}

// EnvName is the environment variable of a flag: TOOLPDP_ and its name in
// upper case, "-" as "_".
func EnvName(flagName string) string {
	return "TOOLPDP_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// isHelp reports whether an argument asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// parseEnv parses flags, then takes each flag not given from its
// TOOLPDP_<FLAG> variable.
func parseEnv(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	return fromEnv(fs, os.Getenv)
}

// parse parses flags; a bad flag is a usage error.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
