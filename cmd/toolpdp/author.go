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
	"github.com/open-policy-agent/opa/v1/topdown"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/internal/strictjson"
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
	format := formatFlag(fs, "text")
	withSynopsis(fs, "toolpdp check [--strict] [--format text|json] PATH...   (PATH: a bundle directory or an opa build .tar.gz)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	if err := format.valid(); err != nil {
		return err
	}
	report := checkReport{Paths: fs.Args(), Warnings: []string{}, Errors: []string{}}
	finish := func(err error) error {
		if !format.json() {
			return err
		}
		report.OK = err == nil
		report.ExitCode = exitCodeOf(err)
		if err != nil {
			report.Errors = append(report.Errors, strings.Split(err.Error(), "\n")...)
		}
		if werr := writeJSON(stdout, report); werr != nil {
			return werr
		}
		return err
	}
	bs, snap, err := compile(ctx, fs.Args())
	if err != nil {
		return finish(invalidBundle(err))
	}
	report.Revision = snap.Revision
	report.Warnings = append(report.Warnings, snap.Warnings...)
	label := "warning:"
	if *strict {
		label = "error:"
	}
	if !format.json() {
		for _, w := range snap.Warnings {
			fmt.Fprintln(stdout, label, w)
		}
	}
	if *strict && len(snap.Warnings) > 0 {
		return finish(codedError{exitInvalid, fmt.Errorf("--strict: the %d warning(s) above are errors", len(snap.Warnings))})
	}
	// serve refuses a bundle whose tests fail; so does check.
	c := testConfig{timeout: *timeout}
	if format.json() {
		c.records = &[]testRecord{}
	}
	pass, fail, err := regoTests(ctx, c, bs, snap, stdout)
	report.Tests = &testSummary{Pass: pass, Fail: fail}
	if c.records != nil {
		report.Tests.Results = *c.records
	}
	if err != nil {
		return finish(err)
	} else if fail > 0 {
		return finish(codedError{exitTestsFailed, fmt.Errorf("%d of the bundles' tests failed", fail)})
	}
	if !format.json() {
		fmt.Fprintf(stdout, "ok: %s (revision %q)\n", strings.Join(fs.Args(), ", "), snap.Revision)
	}
	return finish(nil)
}

// checkReport is check's --format json output (docs/CLI.md).
type checkReport struct {
	OK       bool         `json:"ok"`
	ExitCode int          `json:"exit_code"`
	Paths    []string     `json:"paths"`
	Revision string       `json:"revision,omitempty"`
	Warnings []string     `json:"warnings"`
	Errors   []string     `json:"errors"`
	Tests    *testSummary `json:"tests,omitempty"`
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
	records  *[]testRecord // --format json: results are kept here instead of printed
}

// testRecord is one test's result in --format json output: a Rego test, or
// one step of a decision-test file.
type testRecord struct {
	Kind     string   `json:"kind"` // "rego" | "decision"
	Name     string   `json:"name"` // data.pkg.test_x, or the decision file's name
	File     string   `json:"file,omitempty"`
	Step     *int     `json:"step,omitempty"`    // a decision-test step's index
	Request  string   `json:"request,omitempty"` // what the step sent
	Pass     bool     `json:"pass"`
	Problems []string `json:"problems,omitempty"`
	Rules    []string `json:"rules,omitempty"` // every rule that fired: axis/rule=EFFECT
	Output   string   `json:"output,omitempty"`
}

// testSummary is test's --format json output, and check's tests.
type testSummary struct {
	OK       bool         `json:"ok"`
	ExitCode int          `json:"exit_code"`
	Pass     int          `json:"pass"`
	Fail     int          `json:"fail"`
	Results  []testRecord `json:"results"`
}

func (c testConfig) keep(r testRecord) {
	*c.records = append(*c.records, r)
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
	format := formatFlag(fs, "text")
	withSynopsis(fs, `toolpdp test [-v] [--run REGEX] [--coverage] [--format text|json] PATH...

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
	if err := format.valid(); err != nil {
		return err
	}
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			return fmt.Errorf("%w: --run: %v", errUsage, err)
		}
		c.run = re
	}
	if format.json() {
		c.records = &[]testRecord{}
	}
	err := runTests(ctx, c, fs.Args(), *run, stdout)
	if !format.json() {
		return err
	}
	summary := testSummary{OK: err == nil, ExitCode: exitCodeOf(err), Results: *c.records}
	for _, r := range summary.Results {
		if r.Pass {
			summary.Pass++
		} else {
			summary.Fail++
		}
	}
	if werr := writeJSON(stdout, summary); werr != nil {
		return werr
	}
	return err
}

// runTests runs the Rego and decision tests of the bundles at paths.
func runTests(ctx context.Context, c testConfig, paths []string, run string, stdout io.Writer) error {
	bs, snap, err := compile(ctx, paths)
	if err != nil {
		if c.records != nil {
			c.keep(testRecord{Kind: "bundle", Name: strings.Join(paths, ", "), Problems: strings.Split(err.Error(), "\n")})
		}
		return invalidBundle(err)
	}
	pass, fail, err := regoTests(ctx, c, bs, snap, stdout)
	if err != nil {
		return err
	}
	dpass, dfail, err := decisionTests(ctx, c, paths, stdout)
	if err != nil {
		return err
	}
	pass, fail = pass+dpass, fail+dfail
	if c.records == nil {
		fmt.Fprintln(stdout, strings.Repeat("-", 80))
		if fail == 0 {
			fmt.Fprintf(stdout, "PASS: %d/%d\n", pass, pass)
		} else {
			fmt.Fprintf(stdout, "PASS: %d/%d\nFAIL: %d/%d\n", pass, pass+fail, fail, pass+fail)
		}
	}
	if fail > 0 {
		return codedError{exitTestsFailed, fmt.Errorf("%d of %d tests failed", fail, pass+fail)}
	}
	if pass == 0 && run != "" {
		// A filter that matches nothing is a mistyped name, not a pass.
		return codedError{exitTestsFailed, fmt.Errorf("--run %q matched no test", run)}
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
	var qt topdown.QueryTracer // nil unless coverage is asked: a typed nil is not
	if tracer != nil {
		qt = tracer
	}
	results, err := policy.RunBundleTests(ctx, snap, bs, qt, c.timeout)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range results {
		if c.run != nil && !c.run.MatchString(r.Package+"."+r.Name) {
			continue
		}
		if r.Pass() {
			pass++
		} else {
			fail++
		}
		if c.records != nil {
			rec := testRecord{Kind: "rego", Name: r.Package + "." + r.Name, File: locationFile(r.Location), Pass: r.Pass(), Output: string(r.Output)}
			if !r.Pass() {
				rec.Problems = []string{r.String()}
			}
			c.keep(rec)
			continue
		}
		if r.Pass() && c.verbose {
			fmt.Fprintf(stdout, "%s.%s: PASS (%s)\n", r.Package, r.Name, r.Duration.Round(time.Microsecond))
		} else if !r.Pass() {
			fmt.Fprintln(stdout, r.String())
		}
		if len(r.Output) > 0 && (c.verbose || !r.Pass()) {
			fmt.Fprintf(stdout, "  output:\n%s", r.Output)
		}
	}
	if tracer != nil && c.records == nil {
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
	format := formatFlag(fs, "json")
	explain := fs.String("explain", "", "print OPA's explanation of the evaluation to stderr before the response, as opa eval --explain does: notes (print and trace() calls only) or full (every step)")
	withSynopsis(fs, "toolpdp decide [--bundle PATH]... [--print-input] [--explain notes|full] [--format json|text] < request.json   (a DecideRequest as protojson)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := format.valid(); err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
	if err != nil {
		return err
	}
	var req pb.DecideRequest
	if err := strictjson.Check(raw); err != nil {
		return fmt.Errorf("stdin: not a DecideRequest: %w", err)
	}
	if err := protojson.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("stdin: not a DecideRequest: %w", err)
	}
	if req.GetToolName() == "" {
		return fmt.Errorf("stdin: tool_name: required")
	}
	snap, err := policy.Load(ctx, &bundles.Sources{Paths: paths}, 30*time.Second, time.Now())
	if err != nil {
		return invalidBundle(err)
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
	if !format.json() {
		return printDecisionText(stdout, resp)
	}
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
