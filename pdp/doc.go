// Package pdp is toolpdp's policy decision point: it loads OPA bundles into
// immutable snapshots, swaps them atomically, builds each decision's input
// (with envguard's resolved paths and shell leaves), evaluates the library's
// entrypoint under a deadline, keeps session state, and serves it all over
// gRPC.
package pdp
