package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/decisiontest"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// decisionTests runs every *.decisions.json and *.decisions.yaml file in
// the bundle directories against the bundles, each file on a fresh server
// (no session state carried over), and prints each failing step as a
// failing test. Each step counts as one test.
func decisionTests(ctx context.Context, c testConfig, paths []string, stdout io.Writer) (pass, fail int, err error) {
	var files []string
	for _, p := range paths {
		if info, err := os.Stat(p); err != nil || !info.IsDir() {
			continue // a tarball's decision tests are run from its source directory
		}
		found, err := decisiontest.Find(p)
		if err != nil {
			return 0, 0, err
		}
		files = append(files, found...)
	}
	for _, file := range files {
		f, err := decisiontest.Read(file)
		if err != nil {
			return 0, 0, err // unreadable: the run cannot mean anything
		}
		if c.run != nil && !c.run.MatchString(file) && !c.run.MatchString(f.Name) {
			continue
		}
		if len(f.Agents) > 0 {
			fail++
			fmt.Fprintf(stdout, "%s: FAIL: %v\n", file, decisiontest.ErrNoAgents)
			continue
		}
		res, err := runDecisionFile(ctx, paths, f)
		if err != nil {
			fail++
			fmt.Fprintf(stdout, "%s: FAIL: %v\n", file, err)
			continue
		}
		failed := map[int]bool{}
		for _, fl := range res.Failures {
			failed[fl.Step] = true
			fmt.Fprintf(stdout, "%s: %s: FAIL\n  %s\n", file, fl.What, strings.Join(fl.Problems, "\n  "))
		}
		fail += len(failed)
		pass += res.Steps - len(failed)
		if c.verbose {
			fmt.Fprintf(stdout, "%s (%s): %d of %d steps PASS\n", file, f.Name, res.Steps-len(failed), res.Steps)
		}
	}
	return pass, fail, nil
}

// runDecisionFile runs f against a server of the bundles at paths, in
// process: the engine and gRPC service serve builds, over an in-memory
// connection, with the file's tree under a fresh $ROOT.
func runDecisionFile(ctx context.Context, paths []string, f *decisiontest.File) (decisiontest.Result, error) {
	root, err := os.MkdirTemp("", "toolpdp-decisions-")
	if err != nil {
		return decisiontest.Result{}, err
	}
	defer os.RemoveAll(root)
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return decisiontest.Result{}, err
	}
	if err := decisiontest.MakeTree(f, root); err != nil {
		return decisiontest.Result{}, err
	}
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	engine, err := pdp.New(pdp.Config{Bundles: paths, Logger: log, Registerer: reg})
	if err != nil {
		return decisiontest.Result{}, err
	}
	if err := engine.Reload(ctx, true); err != nil {
		return decisiontest.Result{}, err
	}
	srv, _, err := grpcapi.New(engine, grpcapi.Config{MaxArgsBytes: 1 << 20, Logger: log, Registerer: reg})
	if err != nil {
		return decisiontest.Result{}, err
	}
	l := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///decision-tests",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return decisiontest.Result{}, err
	}
	defer conn.Close()
	res, err := decisiontest.Run(ctx, f, root, decisiontest.Target{Client: pb.NewDecisionServiceClient(conn)})
	if err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, nil
}
