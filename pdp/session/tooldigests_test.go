package session

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/redistest"
)

// Every store keeps tool digests alike: first seen is kept, a different
// one is noted beside it, a person's allow keeps it, and a bound holds.
func TestToolDigestsContract(t *testing.T) {
	b := Bounds{MaxSessions: 8, SessionIdle: time.Hour, MaxPending: 50, PendingTTL: time.Hour}
	open := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory(b) },
		"file": func(t *testing.T) Store {
			f, err := OpenFile(filepath.Join(t.TempDir(), "state.db"), b)
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
		"redis": func(t *testing.T) Store {
			srv := redistest.Start(t)
			r, err := OpenRedis(context.Background(), srv.URL(), b, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	for name, o := range open {
		t.Run(name, func(t *testing.T) {
			s := o(t)
			defer s.Close()
			toolContract(t, s.(ToolDigests))
		})
	}
}

func toolContract(t *testing.T, s ToolDigests) {
	ctx := context.Background()
	k := ToolKey{"ws", "a", "srv", "echo"}
	see := func(k ToolKey, d, def string) ToolRecord {
		t.Helper()
		r, err := s.SeeTool(ctx, k, d, []byte(def))
		if err != nil {
			t.Fatalf("SeeTool(%v, %s): %v", k, d, err)
		}
		return r
	}
	if _, found, err := s.ToolRecord(ctx, k); found || err != nil {
		t.Fatalf("a record before any listing: %v %v", found, err)
	}
	if r := see(k, "d1", `{"name":"echo"}`); r.Digest != "d1" || string(r.Definition) != `{"name":"echo"}` || r.Changed() {
		t.Fatalf("first seen: %+v", r)
	}
	if r := see(k, "d1", `{"name":"echo"}`); r.Changed() {
		t.Fatalf("seen again unchanged: %+v", r)
	}
	r := see(k, "d2", `{"description":"x\\ny","name":"echo"}`)
	if r.Digest != "d1" || r.SeenDigest != "d2" || string(r.Seen) != `{"description":"x\\ny","name":"echo"}` || !r.Changed() {
		t.Fatalf("changed: %+v", r)
	}
	if got, found, err := s.ToolRecord(ctx, k); !found || err != nil || got.SeenDigest != "d2" || got.Digest != "d1" {
		t.Fatalf("ToolRecord after the change: %+v %v %v", got, found, err)
	}
	// Asks about the seen definition are noted, bounded; one about another
	// definition is not.
	for i := range MaxToolAsks + 2 {
		if err := s.AskTool(ctx, k, "d2", fmt.Sprint("ask", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AskTool(ctx, k, "d9", "stale"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ToolRecord(ctx, k); len(got.Asks) != MaxToolAsks || got.Asks[0] != "ask2" || got.Asks[MaxToolAsks-1] != fmt.Sprint("ask", MaxToolAsks+1) || got.SeenDigest != "d2" {
		t.Fatalf("asks noted: %+v", got.Asks)
	}
	if r := see(k, "d2", `{"description":"x\\ny","name":"echo"}`); len(r.Asks) != MaxToolAsks {
		t.Fatalf("seen again, the asks stay: %+v", r)
	}
	// Another agent, workspace or server is another record.
	for _, other := range []ToolKey{{"ws", "b", "srv", "echo"}, {"", "a", "srv", "echo"}, {"ws", "a", "other", "echo"}} {
		if r := see(other, "d2", `{}`); r.Digest != "d2" || r.Changed() {
			t.Errorf("%v shares a record: %+v", other, r)
		}
	}
	// Back to the kept definition: no longer changed.
	if r := see(k, "d1", `{"name":"echo"}`); r.Changed() || r.SeenDigest != "" || len(r.Asks) != 0 {
		t.Fatalf("back to the kept: %+v", r)
	}
	see(k, "d3", `{"name":"echo","title":"3"}`)
	if err := s.KeepTool(ctx, k, "d3", []byte(`{"name":"echo","title":"3"}`)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ToolRecord(ctx, k); got.Digest != "d3" || got.Changed() || got.SeenDigest != "" {
		t.Fatalf("kept after an allow: %+v", got)
	}
	// An allow of an older change keeps it, and a newer one stays seen.
	see(k, "d4", `{"name":"echo","title":"4"}`)
	if err := s.KeepTool(ctx, k, "d5", []byte(`{"name":"echo","title":"5"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.AskTool(ctx, k, "d4", "ask-d4"); err != nil {
		t.Fatal(err)
	}
	if err := s.KeepTool(ctx, k, "d5", []byte(`{"name":"echo","title":"5"}`)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ToolRecord(ctx, k); got.Digest != "d5" || got.SeenDigest != "d4" || len(got.Asks) != 1 {
		t.Fatalf("kept beside a newer change: %+v", got)
	}
	if err := s.KeepTool(ctx, k, "d4", []byte(`{"name":"echo","title":"4"}`)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ToolRecord(ctx, k); got.Digest != "d4" || got.Changed() || len(got.Asks) != 0 {
		t.Fatalf("the seen one kept: %+v", got)
	}
	// The bound: new tools of one server beyond it are refused, known ones not.
	full := ToolKey{"ws", "flood", "srv", ""}
	for i := range MaxToolsPerServer {
		full.Tool = fmt.Sprint("t", i)
		see(full, "d", `{}`)
	}
	full.Tool = "one-more"
	if _, err := s.SeeTool(ctx, full, "d", []byte(`{}`)); !errors.Is(err, ErrTooManyTools) {
		t.Fatalf("past the bound: %v", err)
	}
	full.Tool = "t0"
	if r := see(full, "e", `{"x":1}`); !r.Changed() {
		t.Fatalf("a known tool past the bound: %+v", r)
	}
}

// A file store's digests survive a restart.
func TestToolDigestsFileRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := Bounds{MaxSessions: 8, SessionIdle: time.Hour, MaxPending: 50, PendingTTL: time.Hour}
	f, err := OpenFile(path, b)
	if err != nil {
		t.Fatal(err)
	}
	k := ToolKey{"", "a", "srv", "echo"}
	ctx := context.Background()
	if _, err := f.SeeTool(ctx, k, "d1", []byte(`{"name":"echo"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.SeeTool(ctx, k, "d2", []byte(`{"name":"echo","title":"t"}`)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f, err = OpenFile(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, found, err := f.ToolRecord(ctx, k)
	if !found || err != nil || got.Digest != "d1" || got.SeenDigest != "d2" || string(got.Seen) != `{"name":"echo","title":"t"}` {
		t.Fatalf("after a restart: %+v %v %v", got, found, err)
	}
}
