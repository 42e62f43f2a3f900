package grpcapi

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/pdp"
)

// Each kind of engine refusal has its status code, with its message kept;
// anything else is INTERNAL.
func TestStatusOf(t *testing.T) {
	for err, want := range map[error]codes.Code{
		nil: codes.OK,
		&pdp.Error{Code: pdp.InvalidArgument, Message: "m"}:    codes.InvalidArgument,
		&pdp.Error{Code: pdp.NotFound, Message: "m"}:           codes.NotFound,
		&pdp.Error{Code: pdp.FailedPrecondition, Message: "m"}: codes.FailedPrecondition,
		errors.New("m"): codes.Internal,
	} {
		got := status.Convert(statusOf(err))
		if got.Code() != want || (err != nil && got.Message() != "m") {
			t.Errorf("statusOf(%v) = %v", err, got)
		}
	}
}
