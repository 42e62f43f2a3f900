package grpcapi

import (
	"context"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/pdp/tokenfile"
)

// Workspaces binds callers to workspaces, so that access is separate per
// workspace: by the Common Name of a verified client certificate (mTLS),
// or by a bearer token. A bound caller may decide only for agents of its
// own workspace, or for agents that name no workspace.
type Workspaces struct {
	MTLS   bool              // the client certificate's Common Name is the workspace
	Tokens map[string]string // bearer token → workspace, fixed
	// Files are workspaces' token files (workspace → file), kept current
	// by their owner (tokenfile.File.Run): a rotated token is accepted,
	// and the one it replaced refused, from the next read on.
	Files map[string]*tokenfile.File
}

func (w *Workspaces) enabled() bool {
	return w != nil && (w.MTLS || len(w.Tokens) > 0 || len(w.Files) > 0)
}

type workspaceKey struct{}

// callerWorkspace is the workspace the call was bound to, if binding is on.
func callerWorkspace(ctx context.Context) (string, bool) {
	ws, ok := ctx.Value(workspaceKey{}).(string)
	return ws, ok
}

// interceptor identifies the caller of every DecisionService call;
// health and reflection stay open.
func (w *Workspaces) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if _, bound := callerWorkspace(ctx); bound || !strings.HasPrefix(info.FullMethod, "/toolpdp.v1.") {
		return next(ctx, req) // bound already: an approver token names its workspace
	}
	ws, ok := w.identify(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "this server binds callers to workspaces: present a client certificate or an authorization: Bearer token")
	}
	return next(context.WithValue(ctx, workspaceKey{}, ws), req)
}

func (w *Workspaces) identify(ctx context.Context) (string, bool) {
	if w.MTLS {
		if p, ok := peer.FromContext(ctx); ok {
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
				if cn := ti.State.VerifiedChains[0][0].Subject.CommonName; cn != "" {
					return cn, true
				}
			}
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, h := range md.Get("authorization") {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			continue
		}
		if ws, ok := w.match(token); ok {
			return ws, true
		}
	}
	return "", false
}

// match finds the workspace of a token: every token is compared, in
// constant time. A file that holds no valid token now matches nothing, and
// a token that two workspaces' files both hold (a copy-paste in a Secret)
// binds to neither: which one it meant cannot be known.
func (w *Workspaces) match(token string) (string, bool) {
	found, ambiguous := "", false
	see := func(ws, known string) {
		if known != "" && subtle.ConstantTimeCompare([]byte(token), []byte(known)) == 1 {
			ambiguous = ambiguous || (found != "" && found != ws)
			found = ws
		}
	}
	for known, ws := range w.Tokens {
		see(ws, known)
	}
	for ws, f := range w.Files {
		if known, err := f.Token(); err == nil {
			see(ws, known)
		}
	}
	return found, found != "" && !ambiguous
}
