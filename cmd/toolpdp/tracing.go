package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc"

	"github.com/toolpdp/toolpdp/telemetry"
)

// tracing is serve's OpenTelemetry setup: server options that trace every
// RPC, and a shutdown that flushes; both empty when tracing is off.
type tracing struct {
	options  []grpc.ServerOption
	shutdown func()
}

// startTracing turns tracing on when the standard OTEL_EXPORTER_OTLP_*
// variables name an endpoint (see package telemetry).
func startTracing(ctx context.Context, log *slog.Logger) (tracing, error) {
	tp, err := telemetry.FromEnv(ctx, os.Getenv)
	if err != nil || tp == nil {
		return tracing{shutdown: func() {}}, err
	}
	log.Info("tracing RPCs over OTLP", "endpoint", firstSet("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"))
	return tracing{options: telemetry.ServerOptions(tp), shutdown: func() {
		// A collector that is down must not hold shutdown for long.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("flushing traces", "error", err.Error())
		}
	}}, nil
}

func firstSet(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
