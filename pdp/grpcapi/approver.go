package grpcapi

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

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
