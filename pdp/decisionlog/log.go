package decisionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// DecisionPath is the decision-log "path" of every decision: the library's
// entrypoint, as OPA names it in its own decision logs.
const DecisionPath = "toolpdp/decision/result"

// Defaults of Config: the decisions queued at most, and the memory they
// hold at most.
const (
	DefaultQueueSize  = 10000
	DefaultQueueBytes = 16 << 20
)

// Log writes every decision as one JSON line, in OPA's decision-log
// shape plus toolpdp's reasons, and denials and confirmations as events in
// the same stream. Writing happens off the request path: Record puts an
// entry on a queue bounded in entries and in bytes, and when the queue is
// full either drops and counts it or blocks, as configured. Every line is
// masked before it is written: values by name and by shape (secrets.go),
// then by the bundle's own OPA mask policy (mask.go).
type Log struct {
	queue      chan Entry
	w          io.Writer
	block      bool
	required   bool
	names      nameMatcher
	log        *slog.Logger
	done       chan struct{}
	abort      chan struct{} // closed when Close stops waiting for a failing writer
	once       sync.Once
	dropped    prometheus.Counter
	written    prometheus.Counter
	maskErrs   prometheus.Counter
	writeErrs  prometheus.Counter
	unwritten  prometheus.Counter
	failures   failures
	partial    bool // the writer's last line is incomplete (the writer goroutine's)
	closeGrace time.Duration

	mu       sync.Mutex
	space    *sync.Cond // signalled when queued bytes are released
	queued   int64      // estimated bytes the queued entries hold
	maxBytes int64
}

// Config shapes a Log. Zero values take the defaults (withDefaults).
type Config struct {
	Writer     io.Writer // stdout, or a rotating file
	QueueSize  int       // entries queued at most
	QueueBytes int64     // bound on the memory queued entries hold (estimated)
	Block      bool      // when the queue is full: block the request (true) or drop the entry (false)
	Redact     []string  // names to mask; DefaultRedact when nil
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics go to a registry nobody gathers
	// Required: a decision answers allow or ask only once its line is
	// written (RecordRequired); see --decision-log-required.
	Required bool
	// Backoff bounds the wait between retries of a failed write.
	Backoff Backoff
}

// withDefaults is c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Redact == nil {
		c.Redact = DefaultRedact
	}
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Backoff == (Backoff{}) {
		c.Backoff = DefaultBackoff
	}
	return c
}

// Kind is what an entry records.
type Kind string

// The kinds of entries.
const (
	Decision     Kind = "decision"     // a Decide: a decision line, and an event for a deny
	Confirmation Kind = "confirmation" // a person's answer to an ask
	Result       Kind = "result"       // a reported result of an allowed call
	StateReset   Kind = "state_reset"  // an operator accepted that the state store lost its data
)

// Entry is one decision or event, rendered by the writer goroutine.
type Entry struct {
	Kind    Kind
	At      time.Time
	Req     *pb.DecideRequest  // a decision's request
	Resp    *pb.DecideResponse // a decision's response
	AgentID string             // a decision's agent, defaulted
	Bundles []Bundle           // a decision's bundles
	EvalNs  int64
	Policy  BundlePolicy // the bundle's own mask and drop policy; nil: none
	Secrets SecretFinder // finds a decision's command secrets; nil: none are looked for

	Call       Call                    // the decided call a confirmation or result names
	Confirm    *pb.ConfirmRequest      // a confirmation
	Remembered bool                    // a confirmation that remembered the approval
	AnsweredBy string                  // a confirmation's approver: a token's name, a certificate's subject
	Outcome    string                  // a confirmation's final decision: allow or deny
	Overruled  string                  // why the policy in force turned a person's allow into a deny; "" when it did not
	Report     *pb.ReportResultRequest // a result
	Halt       bool
	AcceptedBy string // a state reset's operator
	LostEpoch  string // a state reset's epoch given up, and the one in force after it
	NewEpoch   string

	bytes int64      // size(), once queued
	ack   chan error // RecordRequired's: the outcome of the one write attempt
}

// Bundle names a bundle a decision was made with.
type Bundle struct{ Name, Revision string }

// Call names the decided call an event is about.
type Call struct{ DecisionID, CallID, AgentID, SessionID, ToolName string }

// BundlePolicy is a bundle's own decision-log policy (OPA's system.log),
// evaluated on a decision line: whether to drop it, else the mask rules
// (JSON pointers, or op/path/value objects) to apply to it.
type BundlePolicy interface {
	Rules(line map[string]any) (drop bool, mask []any, err error)
}

// size estimates the memory an entry holds while queued: a decoded
// request takes about five times its encoded size (measured on args of
// 45,000 keys), and the rest is small.
func (e *Entry) size() int64 {
	n := int64(1024)
	if e.Req != nil {
		n += 6 * int64(proto.Size(e.Req))
	}
	if e.Resp != nil {
		n += 2 * int64(proto.Size(e.Resp))
	}
	if e.Kind != Decision {
		c := &e.Call
		n += int64(len(c.DecisionID)+len(c.CallID)+len(c.AgentID)+len(c.SessionID)+len(c.ToolName)) + 320
	}
	if e.Report != nil {
		n += int64(len(e.Report.GetError()))
	}
	n += int64(len(e.Confirm.GetDenyMessage()) + len(e.AnsweredBy) + len(e.Overruled))
	return n
}

// New starts the writer goroutine; Close drains and stops it.
func New(c Config) (*Log, error) {
	c = c.withDefaults()
	d := &Log{
		queue: make(chan Entry, c.QueueSize), w: c.Writer, block: c.Block, required: c.Required, names: newNameMatcher(c.Redact), log: c.Logger,
		done:       make(chan struct{}),
		abort:      make(chan struct{}),
		closeGrace: defaultCloseGrace,
		maxBytes:   c.QueueBytes,
		failures:   failures{backoff: c.Backoff, log: c.Logger},
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_dropped_total",
			Help: "Decision-log entries dropped because the queue was full (--decision-log-queue or --decision-log-queue-bytes)."}),
		written:  prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_written_total", Help: "Decision-log lines written."}),
		maskErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_mask_errors_total", Help: "Decision-log lines whose bundle mask policy (system.log) failed; the line is not written."}),
		writeErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_write_errors_total",
			Help: "Failed attempts to write a decision-log line (a full disk, a closed pipe); each failed line is retried with backoff."}),
		unwritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_unwritten_total",
			Help: "Decision-log lines never written: still failing at shutdown, or (--decision-log-required) a decision answered deny instead of what the line recorded."}),
	}
	d.space = sync.NewCond(&d.mu)
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolpdp_decision_log_queue_bytes",
		Help: "Memory the queued decision-log entries hold (estimated; bounded by --decision-log-queue-bytes)."},
		func() float64 { d.mu.Lock(); defer d.mu.Unlock(); return float64(d.queued) })
	failing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolpdp_decision_log_failing",
		Help: "1 while decision-log writes fail (retried with backoff), else 0."},
		func() float64 {
			if d.failures.failing.Load() {
				return 1
			}
			return 0
		})
	for _, m := range []prometheus.Collector{d.dropped, d.written, d.maskErrs, d.writeErrs, d.unwritten, queued, failing} {
		if err := c.Registerer.Register(m); err != nil {
			return nil, err
		}
	}
	go d.run()
	return d, nil
}

// Record queues an entry for writing; a nil Log records nothing.
func (d *Log) Record(e Entry) {
	d.enqueue(e)
}

// Required reports whether decisions wait for their line
// (--decision-log-required).
func (d *Log) Required() bool { return d != nil && d.required }

// ErrUnwritten is RecordRequired's answer when a decision's line was not
// written: the decision must not stand.
var ErrUnwritten = errors.New("the decision log cannot be written")

// RecordRequired queues a decision and waits until its line is written:
// nil then. Otherwise (the queue full, writes failing, ctx done) it returns
// an error wrapping ErrUnwritten, and the line is not written: the caller
// answers deny and records that instead. A nil Log returns nil.
func (d *Log) RecordRequired(ctx context.Context, e Entry) error {
	if d == nil {
		return nil
	}
	if err := d.failures.current(); err != nil {
		d.unwritten.Inc()
		return fmt.Errorf("%w: %v", ErrUnwritten, err)
	}
	e.ack = make(chan error, 1)
	if !d.enqueue(e) {
		d.unwritten.Inc()
		return fmt.Errorf("%w: the decision-log queue is full", ErrUnwritten)
	}
	select {
	case err := <-e.ack:
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnwritten, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w before the call's deadline: %v", ErrUnwritten, ctx.Err())
	}
}

// enqueue puts e on the queue, reporting whether it did (a full queue that
// drops counts it).
func (d *Log) enqueue(e Entry) bool {
	if d == nil {
		return false
	}
	size := e.size()
	e.bytes = size
	d.mu.Lock()
	// An entry larger than the whole bound goes alone, into an empty queue.
	for d.queued > 0 && d.queued+size > d.maxBytes {
		if !d.block {
			d.mu.Unlock()
			d.dropped.Inc()
			return false
		}
		d.space.Wait()
	}
	d.queued += size
	d.mu.Unlock()
	if d.block {
		d.queue <- e
		return true
	}
	select {
	case d.queue <- e:
		return true
	default:
		d.release(size)
		d.dropped.Inc()
		return false
	}
}

func (d *Log) release(size int64) {
	d.mu.Lock()
	d.queued -= size
	d.mu.Unlock()
	d.space.Broadcast()
}

// defaultCloseGrace is how long Close waits for a failing writer to
// recover before it gives up on the lines still queued (counted as
// unwritten).
const defaultCloseGrace = 5 * time.Second

// Close writes what is queued and stops. Records after Close panic, so
// close it after the server has stopped.
func (d *Log) Close() {
	if d == nil {
		return
	}
	d.once.Do(func() { close(d.queue) })
	select {
	case <-d.done:
	case <-time.After(d.closeGrace):
		close(d.abort)
		<-d.done
	}
}

func (d *Log) run() {
	defer close(d.done)
	for e := range d.queue {
		lines := d.render(e)
		d.release(e.bytes)
		if e.ack != nil {
			// One attempt: a decision that waits cannot wait for a retry,
			// and a line not written now is not what it will answer.
			err := d.writeLines(&lines)
			e.ack <- err
			if err != nil {
				d.unwritten.Add(float64(len(lines)))
			}
			continue
		}
		d.retry(lines)
	}
}

// render encodes an entry's lines, each ending in a newline.
func (d *Log) render(e Entry) [][]byte {
	var out [][]byte
	for _, line := range d.lines(e) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(line); err != nil {
			d.log.Error("decision log: a line cannot be encoded; it is not written", "error", err.Error())
			d.unwritten.Inc()
			continue
		}
		out = append(out, b.Bytes())
	}
	return out
}

// writeLines writes lines in order, removing each written one; the first
// failure stops it. A line is one Write: a writer that can take a failed
// write's bytes back (File) leaves no part of it behind.
func (d *Log) writeLines(lines *[][]byte) error {
	for len(*lines) > 0 {
		line := (*lines)[0]
		if d.partial {
			// A writer that cannot take bytes back (a pipe) holds part of
			// a line: end it, so this line at least starts on its own.
			line = append([]byte{'\n'}, line...)
		}
		if n, err := d.w.Write(line); err != nil {
			d.partial = n > 0 || d.partial && n == 0
			d.writeErrs.Inc()
			d.failures.failed(err)
			return err
		}
		d.partial = false
		d.failures.succeeded()
		d.written.Inc()
		*lines = (*lines)[1:]
	}
	return nil
}

// retry writes lines, waiting with backoff after each failure, until they
// are written or Close gives up.
func (d *Log) retry(lines [][]byte) {
	for {
		err := d.writeLines(&lines)
		if err == nil {
			return
		}
		if isPermanent(err) {
			d.log.Error("decision log: a line cannot be written; it is skipped", "error", err.Error())
			d.unwritten.Inc()
			lines = lines[1:]
			continue
		}
		select {
		case <-time.After(d.failures.wait()):
		case <-d.abort:
			d.unwritten.Add(float64(len(lines)))
			return
		}
	}
}

// lines renders an entry, masked: a decision, plus a
// tool.permission_denied event for a deny; or a
// tool.confirmation or tool.result event. A decision the bundle's policy
// drops is not written, nor is its event; one whose mask policy fails is
// not written either (counted), since it may hold what the policy meant to
// hide.
func (d *Log) lines(e Entry) []map[string]any {
	ts := e.At.UTC().Format(time.RFC3339Nano)
	switch e.Kind {
	case Confirmation:
		// The ask's request, when given, holds the command whose secrets
		// an overruling message may quote.
		return []map[string]any{d.maskEvent(maskSecrets(map[string]any{
			"type": "tool.confirmation", "timestamp": ts, "decision_id": e.Call.DecisionID, "call_id": e.Call.CallID,
			"agent_id": e.Call.AgentID, "session_id": e.Call.SessionID, "tool_name": e.Call.ToolName,
			"result": e.Confirm.GetResult(), "deny_message": e.Confirm.GetDenyMessage(), "remember": e.Remembered, "halt": e.Halt,
			"answered_by": e.AnsweredBy, "outcome": e.Outcome, "overruled": e.Overruled,
		}, d.names.commandSecrets(e.Secrets, e.Req)).(map[string]any))}
	case StateReset:
		return []map[string]any{d.maskEvent(map[string]any{
			"type": "toolpdp.state_reset", "timestamp": ts, "accepted_by": e.AcceptedBy,
			"lost_epoch": e.LostEpoch, "epoch": e.NewEpoch,
		})}
	case Result:
		return []map[string]any{d.maskEvent(map[string]any{
			"type": "tool.result", "timestamp": ts, "decision_id": e.Call.DecisionID, "call_id": e.Call.CallID,
			"agent_id": e.Call.AgentID, "session_id": e.Call.SessionID, "tool_name": e.Call.ToolName,
			"is_error": e.Report.GetIsError(), "error": e.Report.GetError(), "halt": e.Halt,
		})}
	}
	bundles := map[string]any{}
	for _, b := range e.Bundles {
		bundles[b.Name] = map[string]any{"revision": b.Revision}
	}
	secrets := d.names.commandSecrets(e.Secrets, e.Req)
	decision := maskSecrets(map[string]any{
		"type": "decision", "decision_id": e.Resp.GetDecisionId(), "timestamp": ts, "path": DecisionPath,
		"input":   d.input(e.Req, secrets),
		"result":  d.result(e.Resp),
		"bundles": bundles,
		"metrics": map[string]any{"timer_rego_query_eval_ns": e.EvalNs},
	}, secrets).(map[string]any)
	drop, err := applyPolicy(e.Policy, decision)
	switch {
	case err != nil:
		d.maskErrs.Inc()
		d.log.Error("decision log: the bundle's mask policy failed; the decision is not logged", "decision_id", e.Resp.GetDecisionId(), "error", err.Error())
		return nil
	case drop:
		return nil
	}
	out := []map[string]any{d.maskEvent(decision)}
	if e.Resp.GetDecision() == pb.Decision_DECISION_DENY {
		out = append(out, d.maskEvent(maskSecrets(map[string]any{
			"type": "tool.permission_denied", "timestamp": ts, "decision_id": e.Resp.GetDecisionId(),
			"agent_id": e.AgentID, "session_id": e.Req.GetSessionId(), "tool_name": e.Req.GetToolName(),
			"message": e.Resp.GetMessage(), "halt": e.Resp.GetHalt(),
		}, secrets).(map[string]any)))
	}
	return out
}

// applyPolicy runs a bundle's own policy on a decision line and masks it in
// place. It reports whether the line is to be dropped. Errors leave the
// line masked as far as it got (toolpdp's own masking has already run).
func applyPolicy(p BundlePolicy, line map[string]any) (drop bool, err error) {
	if p == nil {
		return false, nil
	}
	drop, rules, err := p.Rules(line)
	if err != nil || drop {
		return drop, err
	}
	return false, applyMasks(line, rules)
}

// maskEvent masks every string of a line, keys included, by shape and by
// the names assigned inside it.
func (d *Log) maskEvent(line map[string]any) map[string]any {
	d.names.maskValue(line, false)
	return line
}

// Line is one decision in the log: OPA's decision-log fields, with the
// request as input and the response as result.
type Line struct {
	Type       string           `json:"type"`
	DecisionID string           `json:"decision_id"`
	Timestamp  string           `json:"timestamp"`
	Path       string           `json:"path"`
	Input      json.RawMessage  `json:"input"`
	Result     json.RawMessage  `json:"result"`
	Bundles    map[string]any   `json:"bundles"`
	Metrics    map[string]int64 `json:"metrics"`
}

var logJSON = protojson.MarshalOptions{UseProtoNames: true}

// input is the request as a JSON object, with the values of masked names
// in args (at any depth) and env replaced.
func (d *Log) input(req *pb.DecideRequest, secrets []string) any {
	// args go straight from the Struct: no JSON round trip for what may be
	// a megabyte.
	rest := proto.CloneOf(req)
	rest.Args = nil
	m := protoJSON(rest)
	if obj, ok := m.(map[string]any); ok {
		if req.GetArgs() != nil {
			obj["args"] = req.GetArgs().AsMap()
		}
		for _, k := range []string{"args", "env"} {
			if v, ok := obj[k]; ok {
				// The command's secrets first: masking by name could cut
				// one in two (--password="a"'b').
				obj[k] = d.names.maskValue(maskSecrets(v, secrets), true)
			}
		}
	}
	return m
}

// result is the response as a JSON object, its execution env masked by
// name like the request's (it holds the very same values).
func (d *Log) result(resp *pb.DecideResponse) any {
	m := protoJSON(resp)
	if obj, ok := m.(map[string]any); ok {
		if ex, ok := obj["execution"].(map[string]any); ok {
			if env, ok := ex["env"]; ok {
				ex["env"] = d.names.maskValue(env, true)
			}
		}
	}
	return m
}

// protoJSON is a message as decoded JSON (proto field names); nil when it
// cannot be encoded.
func protoJSON(m proto.Message) any {
	raw, err := logJSON.Marshal(m)
	if err != nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return v
}

// defaultNames masks for a server whose decision log is off: what is not
// logged is still masked where people see it.
var defaultNames = newNameMatcher(DefaultRedact)

// MaskedCall is a call's args and env as a decision line would hold them:
// masked by name and by shape, then by the bundle's own mask policy p
// (nil: none), which reads the line as it reads a decision's, and the
// command secrets f finds (nil: none). A policy that fails masks
// everything: what it would have hidden is unknown. A nil Log masks by
// the default names.
func (d *Log) MaskedCall(req *pb.DecideRequest, resp *pb.DecideResponse, p BundlePolicy, f SecretFinder) (args, env any) {
	names := defaultNames
	if d != nil {
		names = d.names
	}
	secrets := names.commandSecrets(f, req)
	in := (&Log{names: names}).input(req, secrets)
	line := maskSecrets(map[string]any{"type": "decision", "decision_id": resp.GetDecisionId(), "path": DecisionPath, "input": in,
		"result": (&Log{names: names}).result(resp)}, secrets).(map[string]any)
	if _, err := applyPolicy(p, line); err != nil {
		return Redacted, Redacted
	}
	names.maskValue(line, false)
	obj, _ := line["input"].(map[string]any)
	return obj["args"], obj["env"]
}
