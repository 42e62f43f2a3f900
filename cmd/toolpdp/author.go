package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
// definitions, compile. Warnings are printed; errors fail.
func check(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: toolpdp check PATH...")
		return errUsage
	}
	_, snap, err := compile(ctx, fs.Args())
	if err != nil {
		return err
	}
	for _, w := range snap.Warnings {
		fmt.Fprintln(stdout, "warning:", w)
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

// test runs the bundles' _test.rego files together with the library.
func test(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("test", stderr)
	coverage := fs.Bool("coverage", false, "report the coverage of the bundles' Rego files")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the whole run")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: toolpdp test [--coverage] PATH...")
		return errUsage
	}
	bs, snap, err := compile(ctx, fs.Args())
	if err != nil {
		return err
	}
	var tracer *cover.Cover
	if *coverage {
		tracer = cover.New()
	}
	results, err := policy.RunBundleTests(ctx, snap, bs, tracer, *timeout)
	if err != nil {
		return err
	}
	pass, fail := 0, 0
	for _, r := range results {
		if r.Pass() {
			pass++
			continue
		}
		fail++
		fmt.Fprintln(stdout, r.String())
		if len(r.Output) > 0 {
			fmt.Fprintf(stdout, "  output:\n%s", r.Output)
		}
	}
	fmt.Fprintln(stdout, strings.Repeat("-", 80))
	if fail == 0 {
		fmt.Fprintf(stdout, "PASS: %d/%d\n", pass, pass)
	} else {
		fmt.Fprintf(stdout, "PASS: %d/%d\nFAIL: %d/%d\n", pass, pass+fail, fail, pass+fail)
	}
	if tracer != nil {
		report := tracer.Report(snap.Modules())
		fmt.Fprintf(stdout, "coverage: %.1f%%\n", report.Coverage)
		for file, fr := range report.Files {
			if bundles.IsUserFile(bs, file) {
				fmt.Fprintf(stdout, "  %s: %.1f%% (%d lines not covered)\n", file, fr.Coverage, fr.NotCoveredLines)
			}
		}
	}
	if fail > 0 {
		return fmt.Errorf("%d of %d tests failed", fail, pass+fail)
	}
	return nil
}

// decide evaluates one DecideRequest (protojson on stdin) with the policy
// alone — no session state — and prints the response: the policy author's
// debugger, reasons included.
func decide(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("decide", stderr)
	var paths listFlag
	fs.Var(&paths, "bundle", "bundle directory or .tar.gz (repeatable); none: the embedded default agent")
	printInput := fs.Bool("print-input", false, "print the input document the policy sees, instead of deciding")
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
		_, err := fmt.Fprintln(stdout, snap.Input(&req).String())
		return err
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
