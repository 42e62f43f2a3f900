package policy

import (
	"context"
	"fmt"
	"io"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/lineage"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Explanation modes, as `opa eval --explain` names them.
const (
	ExplainNotes = "notes" // only the trace events of print and trace() calls
	ExplainFull  = "full"  // every event of the evaluation
)

// Explain evaluates req as Decide would, for a call in no session and with
// no memo, and writes OPA's explanation of the evaluation to w, as
// `opa eval --explain` prints it: the full trace, or only its notes.
func (s *Snapshot) Explain(ctx context.Context, req *pb.DecideRequest, mode string, w io.Writer) error {
	filter := map[string]func([]*topdown.Event) []*topdown.Event{ExplainNotes: lineage.Notes, ExplainFull: lineage.Full}[mode]
	if filter == nil {
		return fmt.Errorf("--explain %q: want %s or %s", mode, ExplainNotes, ExplainFull)
	}
	id := AgentID(req.GetAgentId())
	input, err := buildInput(ctx, s, id, s.agents[id], req, true)
	if err != nil {
		return err
	}
	tracer := topdown.NewBufferTracer()
	if _, err := eval(ctx, s.query, input, rego.EvalQueryTracer(tracer)); err != nil {
		return err
	}
	topdown.PrettyTraceWithLocation(w, filter(*tracer))
	return nil
}
