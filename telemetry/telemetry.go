// Package telemetry traces the sidecar's RPCs with OpenTelemetry: a span per
// call from otelgrpc's stats handler (the ecosystem's instrumentation for
// grpc-go), and on it what was decided — the decision, the deciding rule,
// the agent and the policy revision. Never the tool's arguments or env:
// they hold what the decision log masks, and a trace backend is not the
// place to unmask it.
//
// Tracing is off unless the standard OTLP variables name an endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); the
// exporters read the rest of OTEL_EXPORTER_OTLP_* (headers, TLS, timeout)
// and the SDK reads OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES themselves.
package telemetry

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Span attribute keys.
const (
	AttrDecision = attribute.Key("toolpdp.decision")        // allow, deny, ask
	AttrRule     = attribute.Key("toolpdp.rule")            // the deciding rule, e.g. configs[Bash]
	AttrAxis     = attribute.Key("toolpdp.axis")            // the deciding rule's axis
	AttrAgent    = attribute.Key("toolpdp.agent_id")        // the agent definition ("default" for "")
	AttrRevision = attribute.Key("toolpdp.policy_revision") // the bundle revisions that decided
	AttrHalt     = attribute.Key("toolpdp.halt")            // the session reached its consecutive cap
	AttrIsError  = attribute.Key("toolpdp.is_error")        // ReportResult: the tool failed
)

// ServerOptions make a gRPC server trace every RPC but health checks (a
// kubelet probing every few seconds is noise) with tp, and annotate the
// spans. The annotating interceptor is chained after the server's own, so it
// sees the response the handler returned.
func ServerOptions(tp trace.TracerProvider) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(tp),
			// Callers that trace join their trace; nothing global is read.
			otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
			otelgrpc.WithFilter(filters.Not(filters.HealthCheck())),
		)),
		grpc.ChainUnaryInterceptor(annotate),
	}
}

// annotate puts what was decided on the RPC's span.
func annotate(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	resp, err := next(ctx, req)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(Attributes(req, resp)...)
	}
	return resp, err
}

// Attributes are the span attributes of one call: identifiers and outcomes
// only, never arguments, env or messages (which quote arguments).
func Attributes(req, resp any) []attribute.KeyValue {
	var out []attribute.KeyValue
	switch r := req.(type) {
	case *pb.DecideRequest:
		out = append(out, AttrAgent.String(agent(r.GetAgentId())))
	case *pb.ConfirmRequest:
		if r.GetAgentId() != "" || r.GetCallId() != "" {
			out = append(out, AttrAgent.String(agent(r.GetAgentId())))
		}
	case *pb.ReportResultRequest:
		if r.GetAgentId() != "" || r.GetCallId() != "" {
			out = append(out, AttrAgent.String(agent(r.GetAgentId())))
		}
		out = append(out, AttrIsError.Bool(r.GetIsError()))
	case *pb.EndSessionRequest:
		out = append(out, AttrAgent.String(agent(r.GetAgentId())))
	}
	switch r := resp.(type) {
	case *pb.DecideResponse:
		out = append(out, AttrDecision.String(decisionName(r.GetDecision())), AttrRevision.String(r.GetPolicyRevision()), AttrHalt.Bool(r.GetHalt()))
		if reason := deciding(r); reason != nil {
			out = append(out, AttrRule.String(reason.GetRule()), AttrAxis.String(reason.GetAxis()))
		}
	case *pb.ConfirmResponse:
		out = append(out, AttrDecision.String(decisionName(r.GetDecision())), AttrHalt.Bool(r.GetHalt()))
	case *pb.ReportResultResponse:
		out = append(out, AttrHalt.Bool(r.GetHalt()))
	case *pb.StatusResponse:
		out = append(out, AttrRevision.String(r.GetPolicyRevision()))
	}
	return out
}

// agent is the agent a request names; "" is the "default" definition.
func agent(id string) string {
	if id == "" {
		return "default"
	}
	return id
}

// deciding is the first reason whose effect is the decision: reasons come
// in precedence order, so that is the rule that decided.
func deciding(r *pb.DecideResponse) *pb.Reason {
	for _, reason := range r.GetReasons() {
		if reason.GetEffect() == r.GetDecision() {
			return reason
		}
	}
	return nil
}

func decisionName(d pb.Decision) string {
	return strings.ToLower(strings.TrimPrefix(d.String(), "DECISION_"))
}

// FromEnv builds a tracer provider exporting over OTLP when getenv names an
// endpoint, or returns nil: tracing off. OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn it off too. The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL: grpc,
// or http/protobuf (the OTLP default).
func FromEnv(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return nil, nil
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not grpc or http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// service.name is toolpdp unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (later detectors win).
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "toolpdp")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
