// Package client is a small Go client for a toolpdp sidecar. Its Check is
// fail-closed: an unreachable, slow or failing sidecar yields a deny, never
// an allow — agent hooks that fail open turn an outage into a bypass.
package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/clip"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// DefaultTimeout bounds one decision when the caller's context has no
// sooner deadline.
const DefaultTimeout = 2 * time.Second

// Client asks a toolpdp sidecar for decisions.
type Client struct {
	conn    *grpc.ClientConn
	svc     pb.DecisionServiceClient
	timeout time.Duration
}

// Dial connects to addr: "unix:///path" or "host:port" (plaintext, as a
// sidecar on the pod's loopback or a shared socket). Pass grpc.DialOptions
// for TLS or a bearer token. The connection is made lazily.
func Dial(addr string, opts ...grpc.DialOption) (*Client, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(Target(addr), opts...)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, svc: pb.NewDecisionServiceClient(conn), timeout: DefaultTimeout}, nil
}

// Target is the gRPC target of a sidecar's address: "unix:///path" as it
// is, "host:port" dialled as given (passthrough, no name resolution
// scheme read into it).
func Target(addr string) string {
	if strings.HasPrefix(addr, "unix://") {
		return addr
	}
	return "passthrough:///" + addr
}

// WithTimeout sets the bound on one decision.
func (c *Client) WithTimeout(d time.Duration) *Client {
	c.timeout = d
	return c
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Raw is the generated DecisionService client, for the methods this one
// does not wrap (ListPending, Status, FilterTools).
func (c *Client) Raw() pb.DecisionServiceClient { return c.svc }

// Decide asks for a decision and returns what the sidecar said, or its error.
func (c *Client) Decide(ctx context.Context, req *pb.DecideRequest) (*pb.DecideResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.svc.Decide(ctx, req)
}

// Check asks for a decision and never fails open: any error (unreachable,
// timeout, invalid request, a response with no decision) comes back as a
// DECISION_DENY whose message says why, for the model to read.
func (c *Client) Check(ctx context.Context, req *pb.DecideRequest) *pb.DecideResponse {
	resp, err := c.Decide(ctx, req)
	switch {
	case err != nil:
		st := status.Convert(err)
		return deny(fmt.Sprintf("the policy sidecar could not be asked (%s: %s), so %s is denied", st.Code(), st.Message(), toolOf(req)))
	case resp.GetDecision() == pb.Decision_DECISION_UNSPECIFIED:
		return deny(fmt.Sprintf("the policy sidecar gave no decision, so %s is denied", toolOf(req)))
	}
	return resp
}

// AwaitDecision is one wait for a person's answer to an ask, of up to
// waitSeconds (the server caps one at 60): PENDING, ANSWERED or EXPIRED.
// An error is the sidecar's (NOT_FOUND: no such ask).
func (c *Client) AwaitDecision(ctx context.Context, req *pb.AwaitDecisionRequest) (*pb.AwaitDecisionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.GetWaitSeconds())*time.Second+c.timeout)
	defer cancel()
	return c.svc.AwaitDecision(ctx, req)
}

// Wait waits for a person's answer to ask (a DecideResponse that asked),
// waiting again while it is pending, until the answer comes or ctx ends,
// and returns the decision it ended in: the allow with its execution, or
// the deny with the person's message (an expired ask is a deny). It never
// fails open: ctx's end, an error, or an answer that is neither is a deny.
func (c *Client) Wait(ctx context.Context, ask *pb.DecideResponse) *pb.DecideResponse {
	for {
		wait := int32(60)
		if dl, ok := ctx.Deadline(); ok {
			wait = int32(min(max(time.Until(dl).Seconds(), 1), 60))
		}
		r, err := c.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: ask.GetDecisionId(), WaitSeconds: wait})
		switch {
		case ctx.Err() != nil:
			return deny("the wait for a person's answer ended (" + ctx.Err().Error() + "), so the call is denied")
		case err != nil:
			st := status.Convert(err)
			return deny(fmt.Sprintf("the ask could not be awaited (%s: %s), so the call is denied", st.Code(), st.Message()))
		case r.GetState() == pb.AskState_ASK_STATE_PENDING:
			continue
		case r.GetState() == pb.AskState_ASK_STATE_ANSWERED && (r.GetDecision() == pb.Decision_DECISION_ALLOW || r.GetDecision() == pb.Decision_DECISION_DENY):
			return &pb.DecideResponse{Decision: r.GetDecision(), Message: r.GetMessage(), DecisionId: ask.GetDecisionId(), PolicyRevision: ask.GetPolicyRevision(),
				Reasons: ask.GetReasons(), Execution: r.GetExecution(), Halt: r.GetHalt()}
		case r.GetState() == pb.AskState_ASK_STATE_EXPIRED:
			return deny(r.GetMessage())
		default:
			return deny(fmt.Sprintf("the ask has no answer (%s), so the call is denied", r.GetState()))
		}
	}
}

// CheckAndWait is Check, then, for an ask, Wait: what a loop whose person
// answers elsewhere (the console, toolpdp confirm, a chat bot) runs.
func (c *Client) CheckAndWait(ctx context.Context, req *pb.DecideRequest) *pb.DecideResponse {
	resp := c.Check(ctx, req)
	if resp.GetDecision() != pb.Decision_DECISION_ASK {
		return resp
	}
	return c.Wait(ctx, resp)
}

// toolOf names the call's tool for a message, even when the request has
// none (a request without tool_name is what the sidecar refuses).
func toolOf(req *pb.DecideRequest) string {
	if req.GetToolName() == "" {
		return "the tool call (it names no tool)"
	}
	return fmt.Sprintf("the tool %q", req.GetToolName())
}

// Confirm records a person's answer to an ask. The response's Decision is
// what the call may do: a person's allow comes back DECISION_DENY (with
// Message saying why) when the policy in force now denies the call; go by
// it, never by what the person answered.
func (c *Client) Confirm(ctx context.Context, decisionID string, allow bool, denyMessage string) (*pb.ConfirmResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	result := "deny"
	if allow {
		result = "allow"
	}
	return c.svc.Confirm(ctx, &pb.ConfirmRequest{DecisionId: decisionID, Result: result, DenyMessage: denyMessage})
}

// Answer records a person's answer with every option of ConfirmRequest:
// Remember (later calls of the session that are exactly this call run
// without asking), or naming the call by the agent's own CallId.
func (c *Client) Answer(ctx context.Context, req *pb.ConfirmRequest) (*pb.ConfirmResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.svc.Confirm(ctx, req)
}

// ReportResult tells the sidecar how an allowed call ended: toolErr nil is
// a success, which resets the session's consecutive count; an error adds
// one, like a denial. halt true means the session is at its cap: stop the
// loop and ask the user how to proceed.
func (c *Client) ReportResult(ctx context.Context, decisionID string, toolErr error) (halt bool, err error) {
	req := &pb.ReportResultRequest{DecisionId: decisionID}
	if toolErr != nil {
		req.IsError, req.Error = true, clip.Head(toolErr.Error(), 4096)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.svc.ReportResult(ctx, req)
	if err != nil {
		return false, err
	}
	return resp.GetHalt(), nil
}

// EndSession releases a session's state in the sidecar.
func (c *Client) EndSession(ctx context.Context, agentID, sessionID string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.svc.EndSession(ctx, &pb.EndSessionRequest{AgentId: agentID, SessionId: sessionID})
	return err
}

func deny(msg string) *pb.DecideResponse {
	return &pb.DecideResponse{
		Decision: pb.Decision_DECISION_DENY,
		Message:  msg,
		Reasons:  []*pb.Reason{{Axis: "client", Rule: "fail_closed", Effect: pb.Decision_DECISION_DENY, Message: msg}},
	}
}
