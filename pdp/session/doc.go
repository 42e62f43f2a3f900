// Package session keeps what toolpdp remembers between calls: each
// session's pinned agent definition, its count of consecutive failures and
// the approvals a person asked to remember (Sessions); and the decided
// calls Confirm and ReportResult look up (Pending). Every store is bounded
// in entries and in estimated bytes.
package session
