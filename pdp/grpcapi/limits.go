package grpcapi

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Bounds on the parts of a request that cost work in proportion to their
// count or depth, checked before any policy runs. Past one, the request is
// INVALID_ARGUMENT naming the field.
const (
	MaxArgsDepth  = 64   // objects and lists nested in args
	MaxScopeRoots = 64   // entries of execution_policy.read_paths, and of write_paths
	MaxEnvEntries = 1024 // entries of env, and names of execution_policy.env
)

// checkBounds checks a Decide request's depth and counts.
func checkBounds(r *pb.DecideRequest) error {
	if structTooDeep(r.GetArgs(), MaxArgsDepth) {
		return fmt.Errorf("args: nested deeper than %d levels", MaxArgsDepth)
	}
	if n := len(r.GetEnv()); n > MaxEnvEntries {
		return fmt.Errorf("env: %d entries, more than the limit of %d", n, MaxEnvEntries)
	}
	p := r.GetExecutionPolicy()
	if n := len(p.GetEnv().GetNames()); n > MaxEnvEntries {
		return fmt.Errorf("execution_policy.env.names: %d entries, more than the limit of %d", n, MaxEnvEntries)
	}
	for field, list := range map[string]*pb.PathList{"read_paths": p.GetReadPaths(), "write_paths": p.GetWritePaths()} {
		if n := len(list.GetPaths()); n > MaxScopeRoots {
			return fmt.Errorf("execution_policy.%s.paths: %d entries, more than the limit of %d", field, n, MaxScopeRoots)
		}
	}
	return nil
}

// structTooDeep reports whether s nests objects and lists more than limit
// levels deep (s itself is level 1). It stops as soon as it knows.
func structTooDeep(s *structpb.Struct, limit int) bool {
	if s == nil {
		return false
	}
	if limit < 1 {
		return true
	}
	for _, v := range s.GetFields() {
		if valueTooDeep(v, limit-1) {
			return true
		}
	}
	return false
}

func valueTooDeep(v *structpb.Value, limit int) bool {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		return structTooDeep(k.StructValue, limit)
	case *structpb.Value_ListValue:
		if limit < 1 {
			return true
		}
		for _, e := range k.ListValue.GetValues() {
			if valueTooDeep(e, limit-1) {
				return true
			}
		}
	}
	return false
}
