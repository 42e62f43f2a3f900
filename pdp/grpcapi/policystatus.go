package grpcapi

import (
	"context"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Status reports the policy in force, every source (bundle servers with
// their last download and staleness) and the last errors. Names carry no
// credential. A caller bound to a workspace is not shown an error line
// that names an agent of another workspace, or one the serving policy
// does not know (a rejected bundle's new agent may be anyone's).
func (s *Server) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	out := &pb.StatusResponse{}
	snap := s.engine.Snapshot()
	if snap != nil {
		out.PolicyRevision = snap.Revision
		out.LoadedUnixNanos = snap.Loaded.UnixNano()
		for _, b := range snap.Bundles {
			out.Bundles = append(out.Bundles, &pb.BundleStatus{Name: b.Name, Revision: b.Revision})
		}
	}
	ws, bound := callerWorkspace(ctx)
	shown := func(text string) string {
		if !bound {
			return text
		}
		return visibleTo(ws, snap, text)
	}
	if err := s.engine.LastError(); err != nil {
		out.LastError = shown(err.Error())
	}
	for _, src := range s.engine.Sources() {
		st := &pb.SourceStatus{Name: src.Name, Remote: src.Remote, LastError: shown(src.LastError), Stale: src.Stale}
		if !src.LastSuccess.IsZero() {
			st.LastSuccessUnixNanos = src.LastSuccess.UnixNano()
		}
		out.Sources = append(out.Sources, st)
	}
	lost := s.engine.StateLost()
	out.State = &pb.StateStatus{Up: s.engine.StateUp(), Lost: lost != "", Message: lost}
	return out, nil
}

// AcceptStateReset implements DecisionService: an operator accepts that
// the state store lost its data. It reaches every workspace's sessions,
// so an approver bound to one workspace may not.
func (s *Server) AcceptStateReset(ctx context.Context, _ *pb.AcceptStateResetRequest) (*pb.AcceptStateResetResponse, error) {
	if ws, bound := callerWorkspace(ctx); bound && ws != "" {
		return nil, status.Errorf(codes.PermissionDenied, "accepting the state store's loss resets every workspace's sessions: an approver bound to workspace %q may not", ws)
	}
	from, to, err := s.engine.AcceptStateReset(ctx, approverName(ctx))
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.AcceptStateResetResponse{Accepted: from != "", LostEpoch: from, Epoch: to}, nil
}

// agentNamed finds the agents an error line names: "agent 'coder'" and
// "agents/coder/".
var agentNamed = regexp.MustCompile(`agent '([^']*)'|agents/([^/:\s]+)/`)

// visibleTo keeps the lines of text a caller of workspace ws may read.
func visibleTo(ws string, snap *policy.Snapshot, text string) string {
	var keep []string
	hidden := false
	for _, line := range strings.Split(text, "\n") {
		ok := true
		for _, m := range agentNamed.FindAllStringSubmatch(line, -1) {
			id := m[1] + m[2]
			var a *policy.Agent
			if snap != nil {
				a = snap.Agent(id)
			}
			if a == nil || (a.Workspace != "" && a.Workspace != ws) {
				ok = false
			}
		}
		if ok {
			keep = append(keep, line)
		} else {
			hidden = true
		}
	}
	if hidden {
		keep = append(keep, "(an error about an agent of another workspace, or one the serving policy does not define, is not shown to this workspace: see the server's log)")
	}
	return strings.Join(keep, "\n")
}
