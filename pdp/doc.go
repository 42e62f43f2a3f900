// Package pdp is toolpdp's decision point: one Engine, built by New(Config)
// and kept current by Run, orchestrates a decision — pin the session's
// agent definition, evaluate with the policy in force, count and remember,
// log — and a person's answers to asks and the results agents report.
//
// Each concern lives in a package of its own, imported one way:
// bundles (reading and watching sources), policy (snapshot and stateless
// evaluation), session (pins, counters, decided calls), decisionlog
// (entries, masking, writing). grpcapi serves an Engine over gRPC.
package pdp
