package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/cover"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// check validates bundles the way serve loads them: read, roots, agent
// definitions, compile, the bundles' own _test.rego. Warnings are printed;
// errors fail (exit 3; failing tests exit 4). With --strict, warnings fail
// too.
func check(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", stderr)
	strict := fs.Bool("strict", false, "treat warnings as errors")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the bundles' _test.rego run")
	withSynopsis(fs, "toolpdp check [--strict] PATH...   (PATH: a bundle directory or an opa build .tar.gz)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	bs, snap, err := compile(ctx, fs.Args())
	if err != nil {
		return invalidBundle(err)
	}
	label := "warning:"
	if *strict {
		label = "error:"
	}
	for _, w := range snap.Warnings {
		fmt.Fprintln(stdout, label, w)
	}
	if *strict && len(snap.Warnings) > 0 {
		return codedError{exitInvalid, fmt.Errorf("--strict: the %d warning(s) above are errors", len(snap.Warnings))}
	}
	// serve refuses a bundle whose tests fail; so does check.
	if _, fail, err := regoTests(ctx, testConfig{timeout: *timeout}, bs, snap, stdout); err != nil {
		return err
	} else if fail > 0 {
		return codedError{exitTestsFailed, fmt.Errorf("%d of the bundles' tests failed", fail)}
	}
	fmt.Fprintf(stdout, "ok: %s (revision %q)\n", strings.Join(fs.Args(), ", "), snap.Revision)
	return nil
}

// compile reads, validates and compiles bundles as serve would, without
// running their tests.
func compile(ctx context.Context, paths []string) ([]*bundles.Bundle, *policy.Snapshot, error) {
	bs, err := (&bundles.Sources{Paths: paths}).Read()
	if err != nil {
		return nil, nil, err
	}
	snap, err := policy.NewSnapshot(ctx, bs, time.Now())
	return bs, snap, err
}

// testConfig is what `toolpdp test` was asked.
type testConfig struct {
	verbose  bool
	run      *regexp.Regexp // nil: every test
	coverage bool
	timeout  time.Duration
}

// test runs the bundles' _test.rego files together with the library, then
// their decision tests (*.decisions.json, *.decisions.yaml) against the
// bundles themselves, each through a real server in process.
func test(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("test", stderr)
	var c testConfig
	fs.BoolVar(&c.verbose, "v", false, "verbose: every test and decision-test step, passing or not, with print output")
	run := fs.String("run", "", "run only the Rego tests whose name (data.pkg.test_x) and the decision-test files whose path or name match this regular expression")
	fs.BoolVar(&c.coverage, "coverage", false, "report the coverage of the bundles' own Rego files (the embedded library is not counted)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "bound on the Rego tests' run")
	withSynopsis(fs, `toolpdp test [-v] [--run REGEX] [--coverage] PATH...

Runs the bundles' _test.rego files, then every *.decisions.json and
*.decisions.yaml file in the bundle directories (docs/POLICY.md, Decision
tests) against the bundles themselves.`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			return fmt.Errorf("%w: --run: %v", errUsage, err)
		}
		c.run = re
	}
	bs, snap, err := compile(ctx, fs.Args())
	if err != nil {
		return invalidBundle(err)
	}
	pass, fail, err := regoTests(ctx, c, bs, snap, stdout)
	if err != nil {
		return err
	}
	dpass, dfail, err := decisionTests(ctx, c, fs.Args(), stdout)
	if err != nil {
		return err
	}
	pass, fail = pass+dpass, fail+dfail
	fmt.Fprintln(stdout, strings.Repeat("-", 80))
	if fail == 0 {
		fmt.Fprintf(stdout, "PASS: %d/%d\n", pass, pass)
	} else {
		fmt.Fprintf(stdout, "PASS: %d/%d\nFAIL: %d/%d\n", pass, pass+fail, fail, pass+fail)
	}
	if fail > 0 {
		return codedError{exitTestsFailed, fmt.Errorf("%d of %d tests failed", fail, pass+fail)}
	}
	return nil
}

// regoTests runs the bundles' _test.rego tests, printing failures (every
// result with -v) as opa test does, and the coverage of the bundles' own
// files when asked.
func regoTests(ctx context.Context, c testConfig, bs []*bundles.Bundle, snap *policy.Snapshot, stdout io.Writer) (pass, fail int, err error) {
	var tracer *cover.Cover
	if c.coverage {
		tracer = cover.New()
	}
	results, err := policy.RunBundleTests(ctx, snap, bs, tracer, c.timeout)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range results {
		if c.run != nil && !c.run.MatchString(r.Package+"."+r.Name) {
			continue
		}
		if r.Pass() {
			pass++
			if c.verbose {
				fmt.Fprintf(stdout, "%s.%s: PASS (%s)\n", r.Package, r.Name, r.Duration.Round(time.Microsecond))
			}
		} else {
			fail++
			fmt.Fprintln(stdout, r.String())
		}
		if len(r.Output) > 0 && (c.verbose || !r.Pass()) {
			fmt.Fprintf(stdout, "  output:\n%s", r.Output)
		}
	}
	if tracer != nil {
		printCoverage(stdout, tracer.Report(snap.Modules()), bs)
	}
	return pass, fail, nil
}

// printCoverage reports the coverage of the user bundles' non-test Rego
// files: the embedded library is toolpdp's, tested by toolpdp.
func printCoverage(stdout io.Writer, report cover.Report, bs []*bundles.Bundle) {
	var files []string
	covered, total := 0, 0
	for file := range report.Files {
		if bundles.IsUserFile(bs, file) && !strings.HasSuffix(file, "_test.rego") {
			files = append(files, file)
		}
	}
	sort.Strings(files)
	for _, f := range files {
		fr := report.Files[f]
		covered += fr.CoveredLines
		total += fr.CoveredLines + fr.NotCoveredLines
	}
	if total == 0 {
		fmt.Fprintln(stdout, "coverage: the bundles have no Rego of their own (only data and tests)")
		return
	}
	fmt.Fprintf(stdout, "coverage: %.1f%% of the bundles' own Rego (%d of %d lines)\n", 100*float64(covered)/float64(total), covered, total)
	for _, f := range files {
		fr := report.Files[f]
		fmt.Fprintf(stdout, "  %s: %.1f%% (%d lines not covered)\n", f, fr.Coverage, fr.NotCoveredLines)
	}
}

// decide evaluates one DecideRequest (protojson on stdin) with the policy
// alone — no session state — and prints the response: the policy author's
// debugger, reasons included.
func decide(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("decide", stderr)
	var paths listFlag
	fs.Var(&paths, "bundle", "bundle directory or .tar.gz (repeatable); none: the embedded default agent")
	printInput := fs.Bool("print-input", false, "print the input document the policy sees, instead of deciding")
	explain := fs.String("explain", "", "print OPA's explanation of the evaluation to stderr before the response, as opa eval --explain does: notes (print and trace() calls only) or full (every step)")
	withSynopsis(fs, "toolpdp decide [--bundle PATH]... [--print-input] [--explain notes|full] < request.json   (a DecideRequest as protojson)")
	if err := parse(fs, args); err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
	if err != nil {
		return err
	}
	var req pb.DecideRequest
	if err := protojson.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("stdin: not a DecideRequest: %w", err)
	}
	if req.GetToolName() == "" {
		return fmt.Errorf("stdin: tool_name: required")
	}
	snap, err := policy.Load(ctx, &bundles.Sources{Paths: paths}, 30*time.Second, time.Now())
	if err != nil {
		return err
	}
	if *printInput {
		in, err := snap.Input(&req)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, in.String())
		return err
	}
	if *explain != "" {
		if err := snap.Explain(ctx, &req, *explain, stderr); err != nil {
			return err
		}
	}
	resp := decideOne(ctx, snap, &req, slog.New(slog.NewTextHandler(stderr, nil)))
	out, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(resp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, string(out))
	return err
}

// decideOne decides req with the snapshot alone, as serve's evaluation
// would for a call in no session, under a generous timeout; an evaluation
// error (a deny) is logged.
func decideOne(ctx context.Context, snap *policy.Snapshot, req *pb.DecideRequest, log *slog.Logger) *pb.DecideResponse {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := snap.Decide(ctx, req, nil)
	if err != nil {
		log.Error("evaluation failed", "agent_id", policy.AgentID(req.GetAgentId()), "tool_name", req.GetToolName(), "revision", snap.Revision, "error", err)
	}
	resp.DecisionId = pdp.NewDecisionID()
	return resp
}
