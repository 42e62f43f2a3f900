// Package notify tells people that an ask awaits them, and that it was
// answered: a JSON POST per event to each webhook URL, signed with
// HMAC-SHA256 over the body as GitHub signs its webhooks, with a text a
// Slack incoming webhook shows. Deliveries leave a bounded queue, are
// retried with backoff, and never hold up a decision: what cannot be
// queued or delivered is counted and logged, not waited for.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body.
const SignatureHeader = "X-Toolpdp-Signature-256"

// Defaults of Config.
const (
	DefaultQueue    = 1000
	DefaultAttempts = 5
	DefaultBackoff  = 500 * time.Millisecond // doubled after each failed attempt, up to MaxBackoff
	MaxBackoff      = 30 * time.Second
	DefaultTimeout  = 10 * time.Second
	// MaxArgumentBytes bounds the arguments a notification quotes: it
	// points to the console, which shows the whole call.
	MaxArgumentBytes = 2 << 10
)

// Config shapes a Notifier.
type Config struct {
	URLs       []string
	Secret     func() ([]byte, error) // the HMAC key, read at each delivery (it may rotate)
	ConsoleURL string                 // the console's address for people; "" links nothing
	Queue      int                    // events waiting at most; DefaultQueue when 0
	Attempts   int                    // deliveries tried per event and URL; DefaultAttempts when 0
	Backoff    time.Duration          // DefaultBackoff when 0
	Timeout    time.Duration          // one POST; DefaultTimeout when 0
	Client     *http.Client           // nil: a client with Timeout
	Logger     *slog.Logger
	// Show renders an ask as approvers see it (masked, every character
	// visible); it runs off the request's path.
	Show func(session.Call) *pb.PendingAsk
}

// Event is what a notification says: an ask as approvers see it (masked,
// every character visible), and for an answer, how it ended.
type Event struct {
	Ask        *pb.PendingAsk
	Answered   bool
	Decision   pb.Decision // an answer's final decision
	AnsweredBy string
	Workspace  string
}

// Notifier delivers events to every URL.
type Notifier struct {
	cfg     Config
	events  chan pdp.AskEvent
	queue   chan delivery
	wg      sync.WaitGroup
	sent    prometheus.Counter
	failed  *prometheus.CounterVec
	dropped prometheus.Counter
}

type delivery struct {
	url  string
	body []byte
}

// New checks the URLs and builds a notifier; Run delivers.
func New(c Config) (*Notifier, error) {
	for _, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return nil, fmt.Errorf("--notify-url %q: not an http(s) URL", redactURL(u))
		}
	}
	if c.Secret == nil {
		return nil, fmt.Errorf("--notify-url needs --notify-secret-file: a notification is signed, so that its receiver can tell it from a forgery")
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueue
	}
	if c.Attempts <= 0 {
		c.Attempts = DefaultAttempts
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.Timeout}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: c, events: make(chan pdp.AskEvent, c.Queue), queue: make(chan delivery, c.Queue),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_notifications_sent_total", Help: "Notifications delivered (a 2xx answer)."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolpdp_notification_failures_total",
			Help: "Notification deliveries that failed: attempt (one try, retried) or gave_up (every attempt failed)."}, []string{"reason"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_notifications_dropped_total",
			Help: "Notifications not queued because the queue was full (--notify-url receivers too slow or down)."}),
	}, nil
}

// Collectors are the notifier's metrics.
func (n *Notifier) Collectors() []prometheus.Collector {
	return []prometheus.Collector{n.sent, n.failed, n.dropped}
}

// Notify queues an engine's event (pdp.Engine.OnAsk); it never blocks: a
// full queue drops and counts it.
func (n *Notifier) Notify(ev pdp.AskEvent) {
	select {
	case n.events <- ev:
	default:
		n.dropped.Inc()
		n.cfg.Logger.Warn("notification dropped: the queue is full")
	}
}

// render turns an engine's event into what a notification says.
func (n *Notifier) render(ev pdp.AskEvent) Event {
	var a *pb.PendingAsk
	if n.cfg.Show != nil {
		a = n.cfg.Show(ev.Call)
	} else {
		a = &pb.PendingAsk{DecisionId: ev.Call.DecisionID}
	}
	return Event{Ask: a, Answered: ev.Answered, Decision: ev.Call.Answer, AnsweredBy: ev.Call.AnsweredBy, Workspace: ev.Call.Workspace}
}

// send queues ev's notification for every URL, dropping and counting what
// does not fit.
func (n *Notifier) send(ev Event) {
	body, err := json.Marshal(n.payload(ev))
	if err != nil {
		n.cfg.Logger.Error("notification not encoded", "error", err.Error())
		return
	}
	for _, u := range n.cfg.URLs {
		select {
		case n.queue <- delivery{url: u, body: body}:
		default:
			n.dropped.Inc()
			n.cfg.Logger.Warn("notification dropped: the queue is full", "url", redactURL(u))
		}
	}
}

// Run delivers queued notifications until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	const workers = 2
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-n.events:
				n.send(n.render(ev))
			}
		}
	}()
	for range workers {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case d := <-n.queue:
					n.deliver(ctx, d)
				}
			}
		}()
	}
	n.wg.Wait()
}

// deliver posts d, retrying with backoff, until it is accepted, every
// attempt failed, or ctx ends.
func (n *Notifier) deliver(ctx context.Context, d delivery) {
	wait := n.cfg.Backoff
	for attempt := 1; ; attempt++ {
		err := n.post(ctx, d)
		if err == nil {
			n.sent.Inc()
			return
		}
		n.failed.WithLabelValues("attempt").Inc()
		if attempt >= n.cfg.Attempts || ctx.Err() != nil {
			n.failed.WithLabelValues("gave_up").Inc()
			n.cfg.Logger.Error("notification not delivered", "url", redactURL(d.url), "attempts", attempt, "error", err.Error())
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, MaxBackoff)
	}
}

func (n *Notifier) post(ctx context.Context, d delivery) error {
	key, err := n.cfg.Secret()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolpdp-notify")
	req.Header.Set(SignatureHeader, Sign(key, d.body))
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), d.url, redactURL(d.url)))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// Sign is the signature header's value for body: "sha256=" and the hex
// HMAC-SHA256 of body under key.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header is body's signature under key, in
// constant time: what a receiver checks.
func Verify(key, body []byte, header string) bool {
	return hmac.Equal([]byte(header), []byte(Sign(key, body)))
}

// redactURL is u without its path and query: a Slack webhook's path is
// its secret.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(an unparsable URL)"
	}
	return p.Scheme + "://" + p.Host + "/…"
}
