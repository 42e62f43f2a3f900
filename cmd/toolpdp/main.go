// Command toolpdp is the policy decision point for AI-agent tool calls:
//
//	toolpdp serve  [--bundle PATH]... [--listen ADDR]...   run the gRPC sidecar
//	toolpdp check  PATH...                                 validate bundles
//	toolpdp test   PATH...                                 run bundles' _test.rego
//	toolpdp decide [--bundle PATH]...                      decide one request from stdin
//	toolpdp status [--addr ADDR]                           ask a running server what it serves
//	toolpdp pending [--addr ADDR]                          list the asks waiting for a person
//	toolpdp replay --bundle PATH... LOG...                 diff a candidate bundle against logged decisions
//	toolpdp hook claude-code [--addr ADDR]                 answer one Claude Code hook event from stdin
//
// Exit codes: 0 success; 1 the bundle, test or request failed; 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage:
  toolpdp serve  [--bundle PATH]... [--listen ADDR]... [flags]   run the gRPC sidecar
  toolpdp check  PATH...                                          validate bundles (Rego and agent definitions)
  toolpdp test   [--coverage] PATH...                             run the bundles' _test.rego files
  toolpdp decide [--bundle PATH]...                               decide one DecideRequest (JSON on stdin)
  toolpdp status [--addr ADDR]                                    a running server's policy revision and last reload error
  toolpdp pending [--addr ADDR]                                   the asks waiting for a person
  toolpdp replay --bundle PATH... LOG...                          which logged decisions a candidate bundle would change
  toolpdp hook claude-code [--addr ADDR] [--agent-id ID]          answer one Claude Code hook event (JSON on stdin)
Run 'toolpdp COMMAND -h' for a command's flags.
`

// errUsage marks a usage error: exit code 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	var code exitCode
	switch {
	case err == nil:
	case errors.As(err, &code): // the command has printed what it had to
		os.Exit(int(code))
	case errors.Is(err, flag.ErrHelp) || err == errUsage: // the usage is printed already
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
		"serve": serve, "check": check, "test": test, "decide": decide, "status": status, "pending": pending, "replay": replay,
		"hook": hook,
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
