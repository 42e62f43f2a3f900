package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/approver"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Request limits, checked before any policy runs.
const (
	MaxToolNameBytes = 256
	MaxIDBytes       = 256  // agent_id, session_id, server, call_id, decision_id
	MaxFilterTools   = 1024 // tools in one FilterTools request
	// MaxStreamsPerConn bounds the calls one connection has open at once.
	MaxStreamsPerConn = 100
)

// DefaultMaxArgsBytes bounds a request's encoded args when Config does not.
const DefaultMaxArgsBytes = 1 << 20

// Config shapes the gRPC server. Zero values take the defaults
// (withDefaults).
type Config struct {
	MaxArgsBytes int // bound on a request's args (encoded); the message limit follows from it
	Logger       *slog.Logger
	Registerer   prometheus.Registerer            // nil: metrics go to a registry nobody gathers
	Creds        credentials.TransportCredentials // TLS or mTLS; nil: plaintext
	Workspaces   *Workspaces                      // caller binding; nil: none
	// SeparateApprover: Confirm and ListPending are served only on
	// connections of an ApproverListener (serve --confirm-listen).
	SeparateApprover bool
	// Approvers are the tokens every call on an approver connection must
	// present; nil: approver connections are not authenticated here (a
	// unix socket in a directory the agent does not mount).
	Approvers *approver.Tokens

	// MaxInflightBytes bounds the encoded bytes of Decide requests being
	// decided at once; DefaultMaxInflightBytes when 0.
	MaxInflightBytes int64

	// MaxWaiters bounds the AwaitDecision calls waiting at once;
	// DefaultMaxWaiters when 0.
	MaxWaiters int

	// MaxReceiveBytes bounds the requests being received at once, on
	// every method, counted at the largest message size before any of a
	// message is read (receive.go); DefaultMaxReceiveBytes when 0.
	MaxReceiveBytes int64

	// Options are added after the server's own (tracing's stats handler
	// and its interceptor, chained innermost).
	Options []grpc.ServerOption
}

// StateHealthService is the health service name that reports the session
// state store: NOT_SERVING while it cannot be reached (calls with a session
// and asks are denied meanwhile; calls without one are decided, so the
// server's own health stays SERVING).
const StateHealthService = "toolpdp.v1.StateStore"

// Server is the gRPC face of an Engine.
type Server struct {
	pb.UnimplementedDecisionServiceServer
	engine *pdp.Engine
	health *health.Server
	cfg    Config

	inflight *byteGate    // bytes of Decide requests being decided
	receive  *receiveGate // streams whose request is being received
	waiters  *waiters     // AwaitDecision calls waiting
}

// New builds the gRPC server: the decision service, health, reflection
// and one interceptor chain. Health turns SERVING when the engine has a
// policy in force.
func New(engine *pdp.Engine, cfg Config) (*grpc.Server, *Server, error) {
	cfg = cfg.withDefaults()
	maxMessage := cfg.MaxArgsBytes + 64<<10
	s := &Server{engine: engine, health: health.NewServer(), cfg: cfg, inflight: newByteGate(cfg.MaxInflightBytes), waiters: newWaiters(cfg.MaxWaiters),
		receive: newReceiveGate(cfg.MaxReceiveBytes, maxMessage)}
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .05, .25, 1}),
	))
	for _, c := range append(append(s.inflight.collectors(), s.waiters.collectors()...), metrics, s.receive.refused) {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, nil, fmt.Errorf("register gRPC metrics: %w", err)
		}
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newUTF8Codec(s.inflight)),
		grpc.MaxRecvMsgSize(maxMessage),
		grpc.InTapHandle(s.receive.tap),
		grpc.StatsHandler(receiveStats{}),
		// Streams per connection, and buffers per connection, bounded: the
		// listeners bound the connections (server.MaxConnections).
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		// Calls run on goroutines kept between calls: a new goroutine per
		// call grows its stack to a decision's depth every time (a tenth
		// of a Decide's cost). When all are busy a call gets a new one.
		grpc.NumStreamWorkers(uint32(max(8, 4*runtime.GOMAXPROCS(0)))),
		grpc.ReadBufferSize(16 << 10),
		grpc.WriteBufferSize(16 << 10),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(s.chain(metrics)...),
	}
	if cfg.Creds != nil {
		opts = append(opts, grpc.Creds(cfg.Creds))
	}
	opts = append(opts, cfg.Options...)
	srv := grpc.NewServer(opts...)
	pb.RegisterDecisionServiceServer(srv, s)
	healthpb.RegisterHealthServer(srv, s.health)
	reflection.Register(srv)
	metrics.InitializeMetrics(srv)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.health.SetServingStatus(pb.DecisionService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	engine.OnSwap(func(*policy.Snapshot) { s.MarkServing(true) })
	s.health.SetServingStatus(StateHealthService, healthpb.HealthCheckResponse_SERVING)
	engine.OnStateHealth(func(up bool) {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if up {
			st = healthpb.HealthCheckResponse_SERVING
		}
		s.health.SetServingStatus(StateHealthService, st)
	})
	return srv, s, nil
}

// withDefaults is c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.MaxArgsBytes <= 0 {
		c.MaxArgsBytes = DefaultMaxArgsBytes
	}
	if c.MaxInflightBytes <= 0 {
		c.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if c.MaxReceiveBytes <= 0 {
		c.MaxReceiveBytes = DefaultMaxReceiveBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

// chain is the one interceptor chain every call passes, outermost first:
//   - the bytes a Decide request held while decided are released at its end;
//   - recovery: a panic in an interceptor itself becomes INTERNAL;
//   - metrics, then logging: they see every call, panics included, because
//   - recovery again, innermost, turns a handler's panic into INTERNAL
//     before they look at it;
//   - the approver gate, when approvers have their own addresses: Confirm
//     and ListPending only there;
//   - validation: malformed requests never reach the policy;
//   - workspace binding, when configured: who is asking.
func (s *Server) chain(metrics *grpcprom.ServerMetrics) []grpc.UnaryServerInterceptor {
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		s.cfg.Logger.ErrorContext(ctx, "panic in gRPC handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error; the call was not decided, treat it as denied")
	})
	notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.FullMethod() != healthpb.Health_Check_FullMethodName
	})
	chain := []grpc.UnaryServerInterceptor{
		s.releaseInflight,
		recovery.UnaryServerInterceptor(onPanic),
		metrics.UnaryServerInterceptor(),
		selector.UnaryServerInterceptor(s.callLog(), notHealth),
		recovery.UnaryServerInterceptor(onPanic),
	}
	if s.cfg.SeparateApprover {
		chain = append(chain, approverGate, s.approverAuth)
	}
	chain = append(chain, s.validate)
	if s.cfg.Workspaces.enabled() {
		chain = append(chain, s.cfg.Workspaces.interceptor)
	}
	return chain
}

// callLevel logs successful calls at debug: at info, logging every decision
// would cost more than deciding it. The decision log records decisions.
func callLevel(c codes.Code) logging.Level {
	if c == codes.OK {
		return logging.LevelDebug
	}
	return logging.DefaultServerCodeToLevel(c)
}

// callLog is go-grpc-middleware's logging interceptor, one line per
// finished call at callLevel. Building that line's fields costs about as
// much as answering a cached decision, so while the logger drops debug
// lines a call is handled first and only a failed one goes through the
// interceptor, afterwards, with the duration it really took.
func (s *Server) callLog() grpc.UnaryServerInterceptor {
	logged := logging.UnaryServerInterceptor(slogAdapter(s.cfg.Logger),
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(callLevel),
		logging.WithFieldsFromContext(func(ctx context.Context) logging.Fields {
			if took, ok := ctx.Value(callTookKey{}).(time.Duration); ok {
				return logging.DurationToTimeMillisFields(took) // ahead of the interceptor's own
			}
			return nil
		}))
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if s.cfg.Logger.Enabled(ctx, slog.Level(callLevel(codes.OK))) {
			return logged(ctx, req, info, next)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		if err == nil {
			return resp, nil
		}
		ctx = context.WithValue(ctx, callTookKey{}, time.Since(start))
		return logged(ctx, req, info, func(context.Context, any) (any, error) { return resp, err })
	}
}

type callTookKey struct{}

func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// releaseInflight frees, once the call is over, what the codec's
// bytes-in-flight gate admitted for its request.
func (s *Server) releaseInflight(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	defer s.inflight.release(req)
	return next(ctx, req)
}

// validate rejects malformed requests with INVALID_ARGUMENT naming the field.
func (s *Server) validate(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if m, ok := req.(proto.Message); ok {
		if field, bad := markedInvalidUTF8(m); bad {
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", field, errInvalidUTF8)
		}
		if markedOverloaded(m) {
			return nil, status.Errorf(codes.ResourceExhausted, "more than %d bytes of requests are being decided; try again", s.inflight.max)
		}
		if field, bad := markedTooDeep(m); bad {
			return nil, status.Errorf(codes.InvalidArgument, "%s: nested deeper than protobuf decodes (more than %d levels is refused)", field, MaxArgsDepth)
		}
	}
	var err error
	switch r := req.(type) {
	case *pb.DecideRequest:
		err = s.checkDecide(r)
	case *pb.ConfirmRequest:
		err = checkIDs(map[string]string{"decision_id": r.GetDecisionId(), "call_id": r.GetCallId(), "agent_id": r.GetAgentId(), "session_id": r.GetSessionId()})
	case *pb.ReportResultRequest:
		err = checkIDs(map[string]string{"decision_id": r.GetDecisionId(), "call_id": r.GetCallId(), "agent_id": r.GetAgentId(), "session_id": r.GetSessionId()})
	case *pb.AwaitDecisionRequest:
		err = checkIDs(map[string]string{"decision_id": r.GetDecisionId(), "call_id": r.GetCallId(), "agent_id": r.GetAgentId(), "session_id": r.GetSessionId()})
	case *pb.FilterToolsRequest:
		err = checkFilterTools(r)
	case *pb.GetExecutionRequest:
		err = checkGetExecution(r, s.cfg.MaxArgsBytes)
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return next(ctx, req)
}

// checkIDs bounds the ids a Confirm or ReportResult names a call by.
func checkIDs(ids map[string]string) error {
	for field, v := range ids {
		if len(v) > MaxIDBytes {
			return fmt.Errorf("%s: %d bytes, more than the limit of %d", field, len(v), MaxIDBytes)
		}
	}
	return nil
}

func (s *Server) checkDecide(r *pb.DecideRequest) error {
	switch {
	case r.GetToolName() == "":
		return fmt.Errorf("tool_name: required")
	case len(r.GetToolName()) > MaxToolNameBytes:
		return fmt.Errorf("tool_name: %d bytes, more than the limit of %d", len(r.GetToolName()), MaxToolNameBytes)
	case strings.TrimSpace(r.GetToolName()) != r.GetToolName() || strings.IndexFunc(r.GetToolName(), unicode.IsControl) >= 0:
		// "Bash\t" or "Bash " would be another tool to the policy and the
		// same one to a runtime that trims.
		return fmt.Errorf("tool_name: %q has surrounding blanks or control characters", r.GetToolName())
	}
	if e := r.GetExecutionPolicy().GetEnv(); e != nil {
		// A mode nobody enforces must not pass for "no env policy".
		if err := policy.CheckEnvMode(e.GetMode()); err != nil {
			return fmt.Errorf("execution_policy.env.mode: %w", err)
		}
	}
	// A network rule nobody reads must not pass for "not enforced".
	if err := policy.CheckNetwork(r.GetExecutionPolicy()); err != nil {
		return err
	}
	for field, v := range map[string]string{"agent_id": r.GetAgentId(), "session_id": r.GetSessionId(), "server": r.GetServer(), "call_id": r.GetCallId()} {
		if len(v) > MaxIDBytes {
			return fmt.Errorf("%s: %d bytes, more than the limit of %d", field, len(v), MaxIDBytes)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("%s: %v", field, errInvalidUTF8)
		}
	}
	if n := proto.Size(r.GetArgs()); n > s.cfg.MaxArgsBytes {
		return fmt.Errorf("args: %d bytes, more than the limit of %d", n, s.cfg.MaxArgsBytes)
	}
	if _, ok := pb.Category_name[int32(r.GetCategory())]; !ok {
		return fmt.Errorf("category: %d is not a known category", r.GetCategory())
	}
	return checkBounds(r)
}

// MarkServing sets health to SERVING (a snapshot is loaded) or NOT_SERVING.
func (s *Server) MarkServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(pb.DecisionService_ServiceDesc.ServiceName, st)
}

// Shutdown turns health NOT_SERVING for good, before a graceful stop.
func (s *Server) Shutdown() { s.health.Shutdown() }

// Decide implements DecisionService.
func (s *Server) Decide(ctx context.Context, req *pb.DecideRequest) (*pb.DecideResponse, error) {
	ws, _ := callerWorkspace(ctx)
	resp, err := s.engine.Decide(ctx, ws, req)
	return resp, statusOf(err)
}

// Health is the server's health service, to serve on a probe listener too.
func (s *Server) Health() *health.Server { return s.health }

// Confirm implements DecisionService.
func (s *Server) Confirm(ctx context.Context, req *pb.ConfirmRequest) (*pb.ConfirmResponse, error) {
	ws, _ := callerWorkspace(ctx)
	resp, err := s.engine.Confirm(ctx, ws, approverName(ctx), req)
	return resp, statusOf(err)
}

// AwaitDecision implements DecisionService: the agent waits for a
// person's answer, on its own listener, against a bound of waiters of its
// own; it holds a copy of the names it was given, not the request.
func (s *Server) AwaitDecision(ctx context.Context, req *pb.AwaitDecisionRequest) (*pb.AwaitDecisionResponse, error) {
	ws, _ := callerWorkspace(ctx)
	named := &pb.AwaitDecisionRequest{DecisionId: req.GetDecisionId(), CallId: req.GetCallId(), AgentId: req.GetAgentId(),
		SessionId: req.GetSessionId(), WaitSeconds: req.GetWaitSeconds()}
	if named.WaitSeconds > 0 {
		if !s.waiters.enter() {
			return nil, status.Errorf(codes.ResourceExhausted, "%d AwaitDecision calls are waiting already (--max-waiters); wait a moment and call again", s.waiters.max)
		}
		defer s.waiters.leave()
	}
	resp, err := s.engine.AwaitDecision(ctx, ws, named)
	return resp, statusOf(err)
}

// ReportResult implements DecisionService.
func (s *Server) ReportResult(ctx context.Context, req *pb.ReportResultRequest) (*pb.ReportResultResponse, error) {
	ws, _ := callerWorkspace(ctx)
	resp, err := s.engine.ReportResult(ctx, ws, req)
	return resp, statusOf(err)
}

// GetExecution implements DecisionService: a confined run takes the
// execution of the allow it runs under, on the agent's listener,
// workspace-scoped like Decide.
func (s *Server) GetExecution(ctx context.Context, req *pb.GetExecutionRequest) (*pb.Execution, error) {
	ws, _ := callerWorkspace(ctx)
	resp, err := s.engine.GetExecution(ctx, ws, req)
	return resp, statusOf(err)
}

// checkGetExecution bounds a GetExecution request: its id, and its
// command and argv as a Decide's args are.
func checkGetExecution(r *pb.GetExecutionRequest, maxBytes int) error {
	if err := checkIDs(map[string]string{"decision_id": r.GetDecisionId()}); err != nil {
		return err
	}
	n := len(r.GetCommand())
	for _, a := range r.GetArgv() {
		n += len(a)
	}
	if n > maxBytes {
		return fmt.Errorf("command and argv: %d bytes, more than the limit of %d", n, maxBytes)
	}
	return nil
}

// EndSession implements DecisionService.
func (s *Server) EndSession(ctx context.Context, req *pb.EndSessionRequest) (*pb.EndSessionResponse, error) {
	if req.GetSessionId() == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id: required")
	}
	ws, _ := callerWorkspace(ctx)
	found, err := s.engine.EndSession(ctx, ws, req.GetAgentId(), req.GetSessionId())
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.EndSessionResponse{Found: found}, nil
}

// FilterTools implements DecisionService: which tools some call could
// allow or ask, on the agent's listener, workspace-scoped like Decide.
func (s *Server) FilterTools(ctx context.Context, req *pb.FilterToolsRequest) (*pb.FilterToolsResponse, error) {
	ws, _ := callerWorkspace(ctx)
	resp, err := s.engine.FilterTools(ctx, ws, req)
	return resp, statusOf(err)
}

// checkFilterTools bounds a FilterTools request: its ids, the count of
// tools, and each name as Decide bounds a tool_name.
func checkFilterTools(r *pb.FilterToolsRequest) error {
	if err := checkIDs(map[string]string{"agent_id": r.GetAgentId(), "session_id": r.GetSessionId()}); err != nil {
		return err
	}
	if len(r.GetTools()) > MaxFilterTools {
		return fmt.Errorf("tools: %d tools, more than the limit of %d", len(r.GetTools()), MaxFilterTools)
	}
	for i, t := range r.GetTools() {
		switch {
		case t.GetName() == "":
			return fmt.Errorf("tools[%d].name: required", i)
		case len(t.GetName()) > MaxToolNameBytes || len(t.GetServer()) > MaxToolNameBytes:
			return fmt.Errorf("tools[%d]: a name or server of more than %d bytes", i, MaxToolNameBytes)
		}
	}
	return nil
}

// ListPending implements DecisionService: each ask as a person must see
// it to answer, secrets masked unless the request reveals them.
func (s *Server) ListPending(ctx context.Context, req *pb.ListPendingRequest) (*pb.ListPendingResponse, error) {
	ws, _ := callerWorkspace(ctx)
	asks, next, err := s.engine.ShowPending(ctx, ws, req)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.ListPendingResponse{Asks: asks, NextPageToken: next}, nil
}

// statusOf is the gRPC status of an engine's refusal.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	var e *pdp.Error
	if !errors.As(err, &e) {
		return status.Error(codes.Internal, err.Error())
	}
	code := map[pdp.Code]codes.Code{pdp.InvalidArgument: codes.InvalidArgument, pdp.NotFound: codes.NotFound, pdp.FailedPrecondition: codes.FailedPrecondition,
		pdp.PermissionDenied: codes.PermissionDenied, pdp.Unavailable: codes.Unavailable}[e.Code]
	return status.Error(code, e.Message)
}
