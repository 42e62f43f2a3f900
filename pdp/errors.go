package pdp

import (
	"errors"
	"fmt"

	"github.com/toolpdp/toolpdp/pdp/session"
)

// Code says what kind of request an Error refuses; the gRPC edge maps each
// to a status code.
type Code int

// The kinds of refusal.
const (
	InvalidArgument    Code = iota + 1 // the request says something invalid or contradictory
	NotFound                           // the decision it names is unknown, forgotten or another workspace's
	FailedPrecondition                 // the decision it names is in the wrong state
	PermissionDenied                   // the caller may not use the agent it names
	Unavailable                        // the session state store cannot be reached
)

// Error is a refused Decide, Confirm, ReportResult or ListPending.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// storeError is the refusal of a call the state store failed.
func storeError(err error) error {
	if errors.Is(err, session.ErrStateLost) {
		return errorf(Unavailable, "state_lost: %s", lostMessage(err))
	}
	return errorf(Unavailable, "the session state store cannot be reached: %s", clipError(err))
}
