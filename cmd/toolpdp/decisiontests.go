package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolpdp/toolpdp/pdp/decisionrun"
	"github.com/toolpdp/toolpdp/pdp/localserver"
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
		found, err := decisionrun.Find(p)
		if err != nil {
			return 0, 0, err
		}
		files = append(files, found...)
	}
	for _, file := range files {
		f, err := decisionrun.Read(file)
		if err != nil {
			return 0, 0, err // unreadable: the run cannot mean anything
		}
		if c.run != nil && !c.run.MatchString(file) && !c.run.MatchString(f.Name) {
			continue
		}
		fileFailed := func(err error) {
			fail++
			if c.records != nil {
				c.keep(testRecord{Kind: "decision", Name: f.Name, File: file, Problems: []string{err.Error()}})
			} else {
				fmt.Fprintf(stdout, "%s: FAIL: %v\n", file, err)
			}
		}
		if len(f.Agents) > 0 {
			fileFailed(decisionrun.ErrNoAgents)
			continue
		}
		res, err := runDecisionFile(ctx, paths, f)
		if err != nil {
			fileFailed(err)
			continue
		}
		failed := map[int][]decisionrun.Failure{}
		for _, fl := range res.Failures {
			failed[fl.Step] = append(failed[fl.Step], fl)
			if c.records == nil {
				fmt.Fprintf(stdout, "%s: steps[%d] %s: FAIL\n  %s\n", file, fl.Step, fl.What, strings.Join(fl.Problems, "\n  "))
				if len(fl.Rules) > 0 {
					fmt.Fprintf(stdout, "  rules that fired: %s\n", strings.Join(fl.Rules, ", "))
				}
			}
		}
		fail += len(failed)
		pass += res.Steps - len(failed)
		if c.records != nil {
			for i := 0; i < res.Steps; i++ {
				step := i
				rec := testRecord{Kind: "decision", Name: f.Name, File: file, Step: &step, Pass: len(failed[i]) == 0}
				for _, fl := range failed[i] {
					rec.Request, rec.Rules = fl.What, fl.Rules
					rec.Problems = append(rec.Problems, fl.Problems...)
				}
				c.keep(rec)
			}
			continue
		}
		if c.verbose {
			fmt.Fprintf(stdout, "%s (%s): %d of %d steps PASS\n", file, f.Name, res.Steps-len(failed), res.Steps)
		}
	}
	return pass, fail, nil
}

// runDecisionFile runs f against a server of the bundles at paths, in
// process: the engine and gRPC service serve builds (localserver), over a
// unix socket, with the file's tree under a fresh $ROOT.
func runDecisionFile(ctx context.Context, paths []string, f *decisionrun.File) (decisionrun.Result, error) {
	root, err := os.MkdirTemp("", "toolpdp-decisions-")
	if err != nil {
		return decisionrun.Result{}, err
	}
	defer os.RemoveAll(root)
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return decisionrun.Result{}, err
	}
	if err := decisionrun.MakeTree(f, root); err != nil {
		return decisionrun.Result{}, err
	}
	srv, err := localserver.Start(localserver.Options{Bundles: paths, Unix: true})
	if err != nil {
		return decisionrun.Result{}, err
	}
	defer srv.Close()
	res, err := decisionrun.Run(ctx, f, root, decisionrun.Target{Client: srv.Client})
	if err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, nil
}
