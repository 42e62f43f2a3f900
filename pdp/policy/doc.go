// Package policy turns a set of bundles into an immutable Snapshot —
// validated and decoded agent definitions, compiled Rego, the prepared
// decision query, the agent index evaluated once — and decides a tool call
// against it without any state (Snapshot.Decide): the request becomes the
// library's input (with envguard's resolved paths and shell analysis), the
// library's decision document becomes the response. It also runs a
// bundle's own _test.rego files.
package policy
