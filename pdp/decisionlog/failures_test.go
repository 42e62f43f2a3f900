package decisionlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

func decision(i int) Entry {
	return Entry{Kind: Decision, At: time.Now(), Req: &pb.DecideRequest{ToolName: "Read", CallId: fmt.Sprint("call-", i)},
		Resp: &pb.DecideResponse{DecisionId: fmt.Sprint("d-", i), Decision: pb.Decision_DECISION_ALLOW}}
}

// On a device that is always full, every failed write is counted, the
// errors are logged at a bounded rate, a required decision is refused at
// once, and Close gives up after its grace, counting what it never wrote.
func TestDecisionLogOnAFullDevice(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	var logged testkit.SyncBuffer
	dlog, err := New(Config{Writer: full, QueueSize: 64, Logger: slog.New(slog.NewTextHandler(&logged, nil)), Required: true,
		Backoff: Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	dlog.closeGrace = 100 * time.Millisecond
	err = dlog.RecordRequired(context.Background(), decision(0))
	if !errors.Is(err, ErrUnwritten) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("a required decision on a full device: %v", err)
	}
	for i := range 20 {
		dlog.Record(decision(i))
	}
	deadline := time.Now().Add(5 * time.Second)
	for testkit.CounterValue(t, dlog.writeErrs) < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	err = dlog.RecordRequired(context.Background(), decision(99))
	if !errors.Is(err, ErrUnwritten) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("while writes fail, a required decision must be refused at once: %v after %v", err, time.Since(start))
	}
	dlog.Close()
	if n := testkit.CounterValue(t, dlog.writeErrs); n < 20 {
		t.Errorf("write errors counted: %v", n)
	}
	if n := testkit.CounterValue(t, dlog.written); n != 0 {
		t.Errorf("written on /dev/full: %v", n)
	}
	// Everything recorded is accounted for: dropped, or never written.
	lost := testkit.CounterValue(t, dlog.dropped) + testkit.CounterValue(t, dlog.unwritten)
	if lost != 22 {
		t.Errorf("dropped + unwritten = %v, want the 22 lines recorded", lost)
	}
	if n := strings.Count(logged.String(), "decision log writes fail"); n != 1 {
		t.Errorf("the failure was logged %d times in well under %v; want once:\n%s", n, failureLogEvery, logged.String())
	}
}

// A small tmpfs in a private mount namespace fills up: the file never
// holds part of a line, the failed writes are retried until space returns,
// and every line recorded is written or counted.
func TestDecisionLogFileOnAFullDisk(t *testing.T) {
	if dir := os.Getenv("TOOLPDP_TEST_TMPFS"); dir != "" {
		fullDiskChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs in a private mount namespace needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare:", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs -o size=256k tmpfs "$TOOLPDP_TEST_TMPFS" && exec "$0" -test.run '^TestDecisionLogFileOnAFullDisk$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "TOOLPDP_TEST_TMPFS="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("in a private mount namespace: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func fullDiskChild(t *testing.T, dir string) {
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 160<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "decisions.log")
	file := NewFile(path, 1, 0)
	defer file.Close()
	dlog, err := New(Config{Writer: file, QueueSize: 100000, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Backoff: Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	const total = 400 // ~250 bytes a line: about 100 KiB, more than the disk has left
	for i := range total {
		dlog.Record(decision(i))
	}
	waitFor(t, func() bool { return dlog.failures.failing.Load() }, "writes to fail")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 || raw[len(raw)-1] != '\n' {
		t.Fatalf("on a full disk the log ends in part of a line: %q", raw[max(0, len(raw)-80):])
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	dlog.Close()
	written := testkit.CounterValue(t, dlog.written)
	lines := checkLines(t, path)
	t.Logf("%d lines recorded, %d written, %v write errors, %v dropped, %v unwritten", total, lines, testkit.CounterValue(t, dlog.writeErrs),
		testkit.CounterValue(t, dlog.dropped), testkit.CounterValue(t, dlog.unwritten))
	if float64(lines) != written || lines != total {
		t.Errorf("%d lines in the file, %v counted written, %d recorded: none may be lost once space returns", lines, written, total)
	}
	if testkit.CounterValue(t, dlog.writeErrs) == 0 {
		t.Error("no write error counted on a full disk")
	}
}

// checkLines is the number of lines of a decision log, each one whole JSON.
func checkLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %d is not whole: %v: %q", n+1, err, sc.Text())
		}
		n++
	}
	return n
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
