package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// replay re-evaluates the inputs of a decision log against a candidate
// bundle and reports every decision that would change: a policy diff before
// promotion. Each decision is replayed with the policy alone (no session
// state), so halt and pinning are not replayed. Masked (redacted) values
// stay masked.
func replay(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", stderr)
	var paths listFlag
	fs.Var(&paths, "bundle", "the candidate bundle (repeatable)")
	examples := fs.Int("examples", 5, "changed decisions shown per kind of change")
	failOnChange := fs.Bool("fail-on-change", false, "exit 1 when any decision would change")
	withSynopsis(fs, "toolpdp replay --bundle PATH... [--fail-on-change] LOG...")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: toolpdp replay --bundle PATH... LOG...")
		return errUsage
	}
	snap, err := policy.Load(ctx, &bundles.Sources{Paths: paths}, 30*time.Second, time.Now())
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	r := &replayReport{changes: map[string]int{}, examples: map[string][]string{}, max: *examples}
	for _, f := range fs.Args() {
		if err := r.file(ctx, snap, log, f); err != nil {
			return err
		}
	}
	r.print(stdout, snap.Revision)
	if *failOnChange && r.changed > 0 {
		return fmt.Errorf("%d of %d decisions would change", r.changed, r.total)
	}
	return nil
}

type replayReport struct {
	total, changed, skipped int
	changes                 map[string]int
	examples                map[string][]string
	max                     int
}

func (r *replayReport) file(ctx context.Context, snap *policy.Snapshot, log *slog.Logger, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var line decisionlog.Line
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Type != "decision" {
			if err != nil {
				r.skipped++
			}
			continue
		}
		var req pb.DecideRequest
		var old pb.DecideResponse
		if protojson.Unmarshal(line.Input, &req) != nil || protojson.Unmarshal(line.Result, &old) != nil || req.GetToolName() == "" {
			r.skipped++
			continue
		}
		now := decideOne(ctx, snap, &req, log)
		r.total++
		if now.Decision == old.Decision {
			continue
		}
		r.changed++
		kind := fmt.Sprintf("%s -> %s", short(old.Decision), short(now.Decision))
		r.changes[kind]++
		if len(r.examples[kind]) < r.max {
			r.examples[kind] = append(r.examples[kind], fmt.Sprintf("%s:%d %s agent=%s tool=%s: %s",
				path, n, line.DecisionID, req.GetAgentId(), req.GetToolName(), explain(now)))
		}
	}
	return sc.Err()
}

func (r *replayReport) print(w io.Writer, revision string) {
	fmt.Fprintf(w, "replayed %d decisions against %s: %d would change", r.total, revision, r.changed)
	if r.skipped > 0 {
		fmt.Fprintf(w, " (%d lines skipped: not decisions)", r.skipped)
	}
	fmt.Fprintln(w)
	kinds := make([]string, 0, len(r.changes))
	for k := range r.changes {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-14s %d\n", k, r.changes[k])
		for _, e := range r.examples[k] {
			fmt.Fprintf(w, "      %s\n", e)
		}
	}
}

func short(d pb.Decision) string {
	return strings.ToLower(strings.TrimPrefix(d.String(), "DECISION_"))
}

// explain says why the candidate decides as it does.
func explain(r *pb.DecideResponse) string {
	if r.Message != "" || len(r.Reasons) == 0 {
		return r.Message
	}
	return "now allowed by " + r.Reasons[0].Rule
}
