package policy

import (
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// ShellCommand is what a shell tool's call runs, by the library's
// shell_tools table: each of its command arguments that is a string (a
// command for a shell) and each that is a list of strings (an argv). ok is
// false for a tool that is no built-in shell tool.
func (s *Snapshot) ShellCommand(req *pb.DecideRequest) (commands []string, argvs [][]string, ok bool) {
	names, shell := s.tables.shellTools[req.GetToolName()]
	if !shell || req.GetServer() != "" {
		return nil, nil, false
	}
	for _, name := range names {
		v, found := argAt(req.GetArgs(), name)
		if !found {
			continue
		}
		switch k := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			commands = append(commands, k.StringValue)
		case *structpb.Value_ListValue:
			var argv []string
			for _, a := range k.ListValue.GetValues() {
				s, isString := a.GetKind().(*structpb.Value_StringValue)
				if !isString {
					argv = nil
					break
				}
				argv = append(argv, s.StringValue)
			}
			if argv != nil {
				argvs = append(argvs, argv)
			}
		}
	}
	return commands, argvs, true
}
