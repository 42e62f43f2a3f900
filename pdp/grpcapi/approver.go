package grpcapi

import (
	"context"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/pdp/approver"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A model that can run shell commands can reach the socket its agent uses,
// so the answers of a person — Confirm — and the list of what awaits one —
// ListPending — can be served on separate addresses only (serve
// --confirm-listen): the approver's, which the agent's tools never see.
// Every other address refuses them with PERMISSION_DENIED.

// approverMethods are served only on approver listeners, when there are any.
var approverMethods = map[string]bool{
	pb.DecisionService_Confirm_FullMethodName:     true,
	pb.DecisionService_ListPending_FullMethodName: true,
	// Accepting that the state store lost its data starts every session
	// afresh: an operator's act, never an agent's.
	pb.DecisionService_AcceptStateReset_FullMethodName: true,
}

// ApproverListener marks every connection l accepts as the approver's: the
// server tells them apart by their local address's type, which survives
// TLS (a tls.Conn reports its underlying connection's addresses).
func ApproverListener(l net.Listener) net.Listener { return approverListener{l} }

type approverListener struct{ net.Listener }

func (l approverListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return approverConn{c}, nil
}

type approverConn struct{ net.Conn }

func (c approverConn) LocalAddr() net.Addr { return approverAddr{c.Conn.LocalAddr()} }

// approverAddr is the local address of a connection to an approver listener.
type approverAddr struct{ net.Addr }

func fromApprover(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	_, ok = p.LocalAddr.(approverAddr)
	return ok
}

// approverGate refuses the approver's methods on every other address.
func approverGate(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if approverMethods[info.FullMethod] && !fromApprover(ctx) {
		return nil, status.Errorf(codes.PermissionDenied, "%s is served only on the approver's address (--confirm-listen), not on the agent's", info.FullMethod)
	}
	return next(ctx, req)
}

// approverAuth authenticates every DecisionService call on an approver
// connection by an approver token, when the server has any: the token
// names who answers and, with workspace binding, the workspace answered
// for. An agent's workspace token is not an approver token, so it opens
// nothing here.
func (s *Server) approverAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if !s.cfg.Approvers.Enabled() || !fromApprover(ctx) || !strings.HasPrefix(info.FullMethod, "/toolpdp.v1.") {
		return next(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, h := range md.Get("authorization") {
		if tok, ok := s.cfg.Approvers.Identify(approver.Bearer(h)); ok {
			ctx = context.WithValue(ctx, approverIDKey{}, tok.Name+" (approver token)")
			if s.cfg.Workspaces.enabled() {
				ctx = context.WithValue(ctx, workspaceKey{}, tok.Workspace)
			}
			return next(ctx, req)
		}
	}
	return nil, status.Error(codes.Unauthenticated, "the approver's address takes an approver token (--approver-token-file) as authorization: Bearer TOKEN; an agent's workspace token is not one")
}

// approverIDKey holds who the approver authenticated as (an approver
// token's name), set by the approver's authentication.
type approverIDKey struct{}

// approverName is who gives an answer, for the decision log: the name of
// the approver token presented, the verified client certificate's
// subject, or else the connection it came on.
func approverName(ctx context.Context) string {
	if name, ok := ctx.Value(approverIDKey{}).(string); ok {
		return name
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
		return "certificate:" + ti.State.VerifiedChains[0][0].Subject.String()
	}
	return "connection:" + p.LocalAddr.Network() + ":" + p.LocalAddr.String()
}
