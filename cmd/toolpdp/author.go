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
func compile(ctx context.Context, paths []string) ([]*pdp.Bundle, *pdp.Snapshot, error) {
	bundles, err := (&pdp.Sources{Paths: paths}).Read()
	if err != nil {
		return nil, nil, err
	}
	snap, err := pdp.NewSnapshot(ctx, bundles, time.Now())
	return bundles, snap, err
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
	bundles, snap, err := compile(ctx, fs.Args())
	if err != nil {
		return err
	}
	var tracer *cover.Cover
	if *coverage {
		tracer = cover.New()
	}
	results, err := pdp.RunBundleTests(ctx, snap, bundles, tracer, *timeout)
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
			if pdp.IsUserFile(bundles, file) {
				fmt.Fprintf(stdout, "  %s: %.1f%% (%d lines not covered)\n", file, fr.Coverage, fr.NotCoveredLines)
			}
		}
	}
	if fail > 0 {
		return fmt.Errorf("%d of %d tests failed", fail, pass+fail)
	}
	return nil
}

// decide evaluates one DecideRequest (protojson on stdin) and prints the
// response: the policy author's debugger, reasons included.
func decide(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("decide", stderr)
	var bundles listFlag
	fs.Var(&bundles, "bundle", "bundle directory or .tar.gz (repeatable); none: the embedded default agent")
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
	snap, err := pdp.Load(ctx, &pdp.Sources{Paths: bundles}, 30*time.Second, time.Now())
	if err != nil {
		return err
	}
	engine := pdp.NewEngine(pdp.EngineConfig{
		Logger:      slog.New(slog.NewTextHandler(stderr, nil)),
		EvalTimeout: 10 * time.Second,
		Sessions:    pdp.NewSessions(16, time.Hour),
		Pending:     pdp.NewPending(16, time.Hour),
	})
	if *printInput {
		_, err := fmt.Fprintln(stdout, snap.Input(&req).String())
		return err
	}
	engine.Swap(snap)
	out, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(engine.Decide(ctx, &req))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, string(out))
	return err
}
