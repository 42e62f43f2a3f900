// Package decisionlog writes decisions and the events around them
// (denials, a person's confirmations, reported results) as JSON lines in
// OPA's decision-log shape, off the request path through a bounded queue.
// Every line is masked before it is written: by name, by the shape of known
// secrets, and by the bundle's own system.log policy.
package decisionlog
