package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// outputFormat is a command's --format: "text" for people, "json" for
// programs (one object, its schema in docs/CLI.md).
type outputFormat struct{ v *string }

func formatFlag(fs *flag.FlagSet, def string) outputFormat {
	return outputFormat{fs.String("format", def, "output: text or json (docs/CLI.md gives each command's JSON)")}
}

func (f outputFormat) valid() error {
	if *f.v != "text" && *f.v != "json" {
		return fmt.Errorf("%w: --format %q: want text or json", errUsage, *f.v)
	}
	return nil
}

func (f outputFormat) json() bool { return *f.v == "json" }

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// exitCodeOf is the code main exits with for err.
func exitCodeOf(err error) int {
	var coded codedError
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &coded):
		return coded.code
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

func locationFile(l *ast.Location) string {
	if l == nil {
		return ""
	}
	return l.File
}

// printDecisionText prints a decision for a person: the answer, its
// message, and every rule that contributed.
func printDecisionText(w io.Writer, resp *pb.DecideResponse) error {
	fmt.Fprintf(w, "%s", strings.TrimPrefix(resp.GetDecision().String(), "DECISION_"))
	if resp.GetHalt() {
		fmt.Fprint(w, " (halt: the session is at its cap)")
	}
	fmt.Fprintln(w)
	if resp.GetMessage() != "" {
		fmt.Fprintf(w, "  message: %s\n", resp.GetMessage())
	}
	for _, r := range resp.GetReasons() {
		fmt.Fprintf(w, "  %s %s %s: %s\n", r.GetAxis(), r.GetRule(), strings.TrimPrefix(r.GetEffect().String(), "DECISION_"), r.GetMessage())
	}
	if e := resp.GetExecution(); e != nil && (e.GetCwd() != "" || len(e.GetEnv()) > 0) {
		fmt.Fprintf(w, "  execution: cwd %q, %d env variables (enforced %v)\n", e.GetCwd(), len(e.GetEnv()), e.GetEnvEnforced())
	}
	fmt.Fprintf(w, "  policy revision: %s, decision id: %s\n", resp.GetPolicyRevision(), resp.GetDecisionId())
	return nil
}
