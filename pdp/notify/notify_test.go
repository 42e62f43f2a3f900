package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolpdp/toolpdp/pdp"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A real receiver on loopback that fails twice: the notification arrives
// on the third attempt, signed, its text escaped for Slack.
func TestDeliveredSignedAfterRetries(t *testing.T) {
	key := []byte("a-notify-secret-0123456789")
	var mu sync.Mutex
	calls := 0
	got := make(chan []byte, 1)
	var sig string
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		sig = r.Header.Get(SignatureHeader)
		got <- body
	}))
	defer rx.Close()
	n, err := New(Config{URLs: []string{rx.URL + "/hook/T000/B000/secretpath"}, Secret: func() ([]byte, error) { return key, nil },
		ConsoleURL: "https://console.example/", Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	n.send(Event{Ask: &pb.PendingAsk{DecisionId: "d1", AgentId: "coder", SessionId: "s", ToolName: "Bash",
		Message: "needs a person <!channel> & *bold*", Arguments: "{\n  \"command\": \"echo `id` <@U123>\",\n  \"token\": \"[REDACTED]\"\n}", Secrets: []string{"args.token"}}})
	var body []byte
	select {
	case body = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification arrived")
	}
	if !Verify(key, body, sig) || !strings.HasPrefix(sig, "sha256=") {
		t.Errorf("signature %q does not verify", sig)
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	text, _ := p["text"].(string)
	for _, bad := range []string{"<!channel>", "<@U123>", "`id`"} {
		if strings.Contains(text, bad) {
			t.Errorf("text holds %q unescaped:\n%s", bad, text)
		}
	}
	if !strings.Contains(text, "&lt;!channel&gt;") || !strings.Contains(text, "<https://console.example/#ask-d1|Answer in the console>") || p["event"] != "ask" {
		t.Errorf("text:\n%s\npayload: %v", text, p)
	}
	if f := testutil.ToFloat64(n.failed.WithLabelValues("attempt")); f != 2 {
		t.Errorf("failed attempts counted: %v, want 2", f)
	}
}

// A receiver that never answers cannot hold up the caller: a full queue
// drops, counted, at once.
func TestNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer rx.Close()
	defer close(hang)
	n, err := New(Config{URLs: []string{rx.URL}, Secret: func() ([]byte, error) { return []byte("k"), nil }, Queue: 2, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	// Notify never waits for the receiver: a hundred of them end long
	// before the hundred seconds they would take waiting out each
	// notification's timeout. The deadline is that hang guard, not a speed.
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		for range 100 {
			n.Notify(pdp.AskEvent{})
		}
	}()
	select {
	case <-queued:
	case <-time.After(30 * time.Second):
		t.Fatal("100 notifications to a receiver that never answers are still queueing after 30s: Notify waits for it")
	}
	if d := testutil.ToFloat64(n.dropped); d < 90 {
		t.Errorf("dropped %v, want most of 100", d)
	}
}

func TestNeedsASecret(t *testing.T) {
	if _, err := New(Config{URLs: []string{"https://hooks.example/x"}}); err == nil {
		t.Error("a notifier without a secret")
	}
	if _, err := New(Config{URLs: []string{"file:///etc/passwd"}, Secret: func() ([]byte, error) { return nil, nil }}); err == nil {
		t.Error("a file URL")
	}
}
