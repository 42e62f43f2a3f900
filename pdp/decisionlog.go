package pdp

import (
	"encoding/json"
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

// DefaultLogQueueBytes bounds the memory the decision-log queue holds.
const DefaultLogQueueBytes = 16 << 20

// DecisionLog writes every decision as one JSON line, in OPA's decision-log
// shape plus toolpdp's reasons, and denials and confirmations as events in
// the same stream. Writing happens off the request path: Record puts an
// entry on a queue bounded in entries and in bytes, and when the queue is
// full either drops and counts it or blocks, as configured. Every line is
// masked before it is written: values by name and by shape (secrets.go),
// then by the bundle's own OPA mask policy (logmask.go).
type DecisionLog struct {
	queue    chan logEntry
	w        io.Writer
	block    bool
	names    nameMatcher
	log      *slog.Logger
	done     chan struct{}
	once     sync.Once
	dropped  prometheus.Counter
	written  prometheus.Counter
	maskErrs prometheus.Counter

	mu       sync.Mutex
	space    *sync.Cond // signalled when queued bytes are released
	queued   int64      // estimated bytes the queued entries hold
	maxBytes int64
}

// DecisionLogConfig shapes a DecisionLog.
type DecisionLogConfig struct {
	Writer     io.Writer // stdout, or a rotating file
	QueueSize  int
	QueueBytes int64    // bound on the memory queued entries hold (estimated); DefaultLogQueueBytes when 0
	Block      bool     // when the queue is full: block the request (true) or drop the entry (false)
	Redact     []string // names to mask; DefaultRedact when nil
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// logEntry is one decision or event, rendered by the writer goroutine.
type logEntry struct {
	kind    string // "decision", "confirmation" or "result"
	at      time.Time
	req     *pb.DecideRequest
	resp    *pb.DecideResponse
	bundles []BundleInfo
	evalNs  int64
	confirm *pb.ConfirmRequest
	ask     *PendingAsk
	agentID string
	halt    bool

	remembered bool                    // a confirmation that remembered the approval
	report     *pb.ReportResultRequest // a result
	policy     *logPolicy              // the bundle's mask and drop policy; nil: none
	bytes      int64                   // size(), once queued
}

// size estimates the memory an entry holds while queued: a decoded
// request takes about five times its encoded size (measured on args of
// 45,000 keys), and the rest is small.
func (e *logEntry) size() int64 {
	n := int64(1024)
	if e.req != nil {
		n += 6 * int64(proto.Size(e.req))
	}
	if e.resp != nil {
		n += 2 * int64(proto.Size(e.resp))
	}
	if e.ask != nil {
		n += e.ask.size()
	}
	if e.report != nil {
		n += int64(len(e.report.GetError()))
	}
	return n
}

// NewDecisionLog starts the writer goroutine; Close drains and stops it.
func NewDecisionLog(c DecisionLogConfig) (*DecisionLog, error) {
	if c.Redact == nil {
		c.Redact = DefaultRedact
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultLogQueueBytes
	}
	d := &DecisionLog{
		queue: make(chan logEntry, c.QueueSize), w: c.Writer, block: c.Block, names: newNameMatcher(c.Redact), log: c.Logger,
		done:     make(chan struct{}),
		maxBytes: c.QueueBytes,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_dropped_total",
			Help: "Decision-log entries dropped because the queue was full (--decision-log-queue or --decision-log-queue-bytes)."}),
		written:  prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_written_total", Help: "Decision-log lines written."}),
		maskErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_mask_errors_total", Help: "Decision-log lines whose bundle mask policy (system.log) failed; the line is not written."}),
	}
	d.space = sync.NewCond(&d.mu)
	if c.Registerer != nil {
		queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolpdp_decision_log_queue_bytes",
			Help: "Memory the queued decision-log entries hold (estimated; bounded by --decision-log-queue-bytes)."},
			func() float64 { d.mu.Lock(); defer d.mu.Unlock(); return float64(d.queued) })
		for _, m := range []prometheus.Collector{d.dropped, d.written, d.maskErrs, queued} {
			if err := c.Registerer.Register(m); err != nil {
				return nil, err
			}
		}
	}
	go d.run()
	return d, nil
}

func (d *DecisionLog) record(e logEntry) {
	if d == nil {
		return
	}
	size := e.size()
	e.bytes = size
	d.mu.Lock()
	// An entry larger than the whole bound goes alone, into an empty queue.
	for d.queued > 0 && d.queued+size > d.maxBytes {
		if !d.block {
			d.mu.Unlock()
			d.dropped.Inc()
			return
		}
		d.space.Wait()
	}
	d.queued += size
	d.mu.Unlock()
	if d.block {
		d.queue <- e
		return
	}
	select {
	case d.queue <- e:
	default:
		d.release(size)
		d.dropped.Inc()
	}
}

func (d *DecisionLog) release(size int64) {
	d.mu.Lock()
	d.queued -= size
	d.mu.Unlock()
	d.space.Broadcast()
}

// Close writes what is queued and stops. Records after Close panic, so
// close it after the server has stopped.
func (d *DecisionLog) Close() {
	if d == nil {
		return
	}
	d.once.Do(func() { close(d.queue) })
	<-d.done
}

func (d *DecisionLog) run() {
	defer close(d.done)
	enc := json.NewEncoder(d.w)
	enc.SetEscapeHTML(false)
	for e := range d.queue {
		lines := d.lines(e)
		d.release(e.bytes)
		for _, line := range lines {
			if err := enc.Encode(line); err != nil {
				d.log.Error("decision log write failed", "error", err.Error())
				continue
			}
			d.written.Inc()
		}
	}
}

// lines renders an entry, masked: a decision, plus a
// tool.permission_denied event for a deny (seed 000); or a
// tool.confirmation or tool.result event. A decision the bundle's policy
// drops is not written, nor is its event; one whose mask policy fails is
// not written either (counted), since it may hold what the policy meant to
// hide.
func (d *DecisionLog) lines(e logEntry) []map[string]any {
	ts := e.at.UTC().Format(time.RFC3339Nano)
	switch e.kind {
	case "confirmation":
		return []map[string]any{d.maskEvent(map[string]any{
			"type": "tool.confirmation", "timestamp": ts, "decision_id": e.ask.DecisionID, "call_id": e.ask.CallID,
			"agent_id": e.ask.AgentID, "session_id": e.ask.SessionID, "tool_name": e.ask.ToolName,
			"result": e.confirm.GetResult(), "deny_message": e.confirm.GetDenyMessage(), "remember": e.remembered, "halt": e.halt,
		})}
	case "result":
		return []map[string]any{d.maskEvent(map[string]any{
			"type": "tool.result", "timestamp": ts, "decision_id": e.ask.DecisionID, "call_id": e.ask.CallID,
			"agent_id": e.ask.AgentID, "session_id": e.ask.SessionID, "tool_name": e.ask.ToolName,
			"is_error": e.report.GetIsError(), "error": e.report.GetError(), "halt": e.halt,
		})}
	}
	bundles := map[string]any{}
	for _, b := range e.bundles {
		bundles[b.Name] = map[string]any{"revision": b.Revision}
	}
	decision := map[string]any{
		"type": "decision", "decision_id": e.resp.GetDecisionId(), "timestamp": ts, "path": DecisionPath,
		"input":   d.input(e.req),
		"result":  d.result(e.resp),
		"bundles": bundles,
		"metrics": map[string]any{"timer_rego_query_eval_ns": e.evalNs},
	}
	drop, err := e.policy.apply(decision)
	switch {
	case err != nil:
		d.maskErrs.Inc()
		d.log.Error("decision log: the bundle's mask policy failed; the decision is not logged", "decision_id", e.resp.GetDecisionId(), "error", err.Error())
		return nil
	case drop:
		return nil
	}
	out := []map[string]any{d.maskEvent(decision)}
	if e.resp.GetDecision() == pb.Decision_DECISION_DENY {
		out = append(out, d.maskEvent(map[string]any{
			"type": "tool.permission_denied", "timestamp": ts, "decision_id": e.resp.GetDecisionId(),
			"agent_id": e.agentID, "session_id": e.req.GetSessionId(), "tool_name": e.req.GetToolName(),
			"message": e.resp.GetMessage(), "halt": e.resp.GetHalt(),
		}))
	}
	return out
}

// maskEvent masks every string of a line, keys included, by shape and by
// the names assigned inside it.
func (d *DecisionLog) maskEvent(line map[string]any) map[string]any {
	d.names.maskValue(line, false)
	return line
}

// DecisionLogLine is one decision in the log: OPA's decision-log fields,
// with the request as input and the response as result.
type DecisionLogLine struct {
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
func (d *DecisionLog) input(req *pb.DecideRequest) any {
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
				obj[k] = d.names.maskValue(v, true)
			}
		}
	}
	return m
}

// result is the response as a JSON object, its execution env masked by
// name like the request's (it holds the very same values).
func (d *DecisionLog) result(resp *pb.DecideResponse) any {
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
