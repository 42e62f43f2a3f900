package pdp

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// DecisionPath is the decision-log "path" of every decision: the library's
// entrypoint, as OPA names it in its own decision logs.
const DecisionPath = "toolpdp/decision/result"

// DefaultRedact are the env and args names masked in the decision log: a
// name is masked when it contains one of these (case does not matter).
var DefaultRedact = []string{"token", "secret", "password", "passwd", "credential", "api_key", "apikey", "private_key", "authorization", "cookie", "session_key", "access_key"}

// Redacted replaces a masked value in the decision log.
const Redacted = "[REDACTED]"

// DecisionLog writes every decision as one JSON line, in OPA's decision-log
// shape plus toolpdp's reasons, and denials and confirmations as events in
// the same stream. Writing happens off the request path: Record puts an
// entry on a bounded queue, and when the queue is full either drops and
// counts it or blocks, as configured.
type DecisionLog struct {
	queue   chan logEntry
	w       io.Writer
	block   bool
	redact  []string
	log     *slog.Logger
	done    chan struct{}
	once    sync.Once
	dropped prometheus.Counter
	written prometheus.Counter
}

// DecisionLogConfig shapes a DecisionLog.
type DecisionLogConfig struct {
	Writer     io.Writer // stdout, or a rotating file
	QueueSize  int
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
}

// NewDecisionLog starts the writer goroutine; Close drains and stops it.
func NewDecisionLog(c DecisionLogConfig) (*DecisionLog, error) {
	if c.Redact == nil {
		c.Redact = DefaultRedact
	}
	d := &DecisionLog{
		queue: make(chan logEntry, c.QueueSize), w: c.Writer, block: c.Block, redact: lower(c.Redact), log: c.Logger,
		done:    make(chan struct{}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_dropped_total", Help: "Decision-log entries dropped because the queue was full."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolpdp_decision_log_written_total", Help: "Decision-log lines written."}),
	}
	if c.Registerer != nil {
		for _, m := range []prometheus.Collector{d.dropped, d.written} {
			if err := c.Registerer.Register(m); err != nil {
				return nil, err
			}
		}
	}
	go d.run()
	return d, nil
}

func lower(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = strings.ToLower(s)
	}
	return out
}

func (d *DecisionLog) record(e logEntry) {
	if d == nil {
		return
	}
	if d.block {
		d.queue <- e
		return
	}
	select {
	case d.queue <- e:
	default:
		d.dropped.Inc()
	}
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
		for _, line := range d.lines(e) {
			if err := enc.Encode(line); err != nil {
				d.log.Error("decision log write failed", "error", err.Error())
				continue
			}
			d.written.Inc()
		}
	}
}

// lines renders an entry: a decision, plus a tool.permission_denied event
// for a deny (seed 000); or a tool.confirmation or tool.result event.
func (d *DecisionLog) lines(e logEntry) []any {
	ts := e.at.UTC().Format(time.RFC3339Nano)
	switch e.kind {
	case "confirmation":
		return []any{map[string]any{
			"type": "tool.confirmation", "timestamp": ts, "decision_id": e.ask.DecisionID, "call_id": e.ask.CallID,
			"agent_id": e.ask.AgentID, "session_id": e.ask.SessionID, "tool_name": e.ask.ToolName,
			"result": e.confirm.GetResult(), "deny_message": e.confirm.GetDenyMessage(), "remember": e.remembered, "halt": e.halt,
		}}
	case "result":
		return []any{map[string]any{
			"type": "tool.result", "timestamp": ts, "decision_id": e.ask.DecisionID, "call_id": e.ask.CallID,
			"agent_id": e.ask.AgentID, "session_id": e.ask.SessionID, "tool_name": e.ask.ToolName,
			"is_error": e.report.GetIsError(), "error": e.report.GetError(), "halt": e.halt,
		}}
	}
	bundles := map[string]any{}
	for _, b := range e.bundles {
		bundles[b.Name] = map[string]string{"revision": b.Revision}
	}
	decision := DecisionLogLine{
		Type: "decision", DecisionID: e.resp.GetDecisionId(), Timestamp: ts, Path: DecisionPath,
		Input:   d.input(e.req),
		Result:  d.result(e.resp),
		Bundles: bundles,
		Metrics: map[string]int64{"timer_rego_query_eval_ns": e.evalNs},
	}
	out := []any{decision}
	if e.resp.GetDecision() == pb.Decision_DECISION_DENY {
		out = append(out, map[string]any{
			"type": "tool.permission_denied", "timestamp": ts, "decision_id": e.resp.GetDecisionId(),
			"agent_id": e.agentID, "session_id": e.req.GetSessionId(), "tool_name": e.req.GetToolName(),
			"message": e.resp.GetMessage(), "halt": e.resp.GetHalt(),
		})
	}
	return out
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

// input is the request with masked env values and args fields.
func (d *DecisionLog) input(req *pb.DecideRequest) json.RawMessage {
	raw, err := logJSON.Marshal(req)
	if err != nil {
		return json.RawMessage(`null`)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return raw
	}
	if env, ok := m["env"].(map[string]any); ok {
		for k := range env {
			if d.masked(k) {
				env[k] = Redacted
			}
		}
	}
	if args, ok := m["args"].(map[string]any); ok {
		d.maskTree(args)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

func (d *DecisionLog) maskTree(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if d.masked(k) {
				t[k] = Redacted
				continue
			}
			d.maskTree(x)
		}
	case []any:
		for _, x := range t {
			d.maskTree(x)
		}
	}
}

func (d *DecisionLog) masked(name string) bool {
	n := strings.ToLower(name)
	for _, r := range d.redact {
		if strings.Contains(n, r) {
			return true
		}
	}
	return false
}

func (d *DecisionLog) result(resp *pb.DecideResponse) json.RawMessage {
	// The response's execution env holds the very values input masks.
	if ex := resp.GetExecution(); ex != nil && len(ex.Env) > 0 {
		masked := make(map[string]string, len(ex.Env))
		for k, v := range ex.Env {
			if d.masked(k) {
				v = Redacted
			}
			masked[k] = v
		}
		c := &pb.DecideResponse{Decision: resp.Decision, Message: resp.Message, DecisionId: resp.DecisionId, PolicyRevision: resp.PolicyRevision,
			Reasons: resp.Reasons, Halt: resp.Halt, Execution: &pb.Execution{Env: masked, Cwd: ex.Cwd}}
		resp = c
	}
	raw, err := logJSON.Marshal(resp)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return raw
}
