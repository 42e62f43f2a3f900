// Package grpcapi serves a pdp.Engine over gRPC: the DecisionService, health
// and reflection behind one interceptor chain (recovery, metrics, logging,
// the approver gate, validation, workspace binding). Requests are validated
// and bounded here, before any policy runs, with a codec that names the
// field a malformed request got wrong; the engine's typed refusals become
// status codes here and nowhere else.
package grpcapi
