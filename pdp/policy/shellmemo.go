package policy

import (
	"context"
	"errors"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/envguard"
)

// The shell analysis of a command is a pure function of its text and the
// snapshot's tables: it reads no file, no cwd and no environment. So a
// snapshot keeps the analyses of the commands it has seen, with the Rego
// terms made from them; what depends on the file system or the agent (the
// protected files a command names, resolved against the cwd, and the
// command rules matched) is worked out per call from the kept analysis.
// A kept analysis and its terms are shared by concurrent decisions: no
// one may change them.

// Bounds of the analyses a snapshot keeps; a longer command is analysed
// every time.
const (
	shellMemoEntries  = 4096
	shellMemoBytes    = 8 << 20
	shellMemoKeyBytes = 4 << 10
)

// shellAnalysis is one command argument analysed: the analysis or why it
// cannot be checked, and the input's terms for its leaves, unseen
// constructs and network redirects.
type shellAnalysis struct {
	a                       *envguard.Analysis
	err                     error
	leaves, unseen, network []*ast.Term
}

// shellMemo keeps one snapshot's analyses.
type shellMemo struct {
	t    *envguard.Tables
	kept *lru[string, *shellAnalysis]
}

func newShellMemo(t *envguard.Tables) *shellMemo {
	return &shellMemo{t: t, kept: newLRU[string, *shellAnalysis](shellMemoEntries, shellMemoBytes)}
}

// analyze is v's analysis, kept or made now. An analysis cut short by ctx
// is not kept.
func (m *shellMemo) analyze(ctx context.Context, v *structpb.Value) *shellAnalysis {
	key, ok := commandKey(v)
	if ok && len(key) <= shellMemoKeyBytes {
		if s, hit := m.kept.get(key); hit {
			return s
		}
	}
	s := &shellAnalysis{}
	s.a, s.err = analyzeArg(ctx, m.t, v)
	if s.err == nil {
		for _, l := range s.a.Leaves {
			s.leaves = append(s.leaves, leafTerm(l))
		}
		for _, u := range s.a.Unseen {
			s.unseen = append(s.unseen, ast.ObjectTerm(item("construct", ast.String(u.Construct)), item("text", ast.String(u.Text))))
		}
		for _, n := range s.a.Network {
			s.network = append(s.network, ast.StringTerm(n))
		}
	}
	if ok && len(key) <= shellMemoKeyBytes && ctx.Err() == nil && !errors.Is(s.err, context.Canceled) && !errors.Is(s.err, context.DeadlineExceeded) {
		// An estimate: the analysis and its terms grow with the command.
		m.kept.put(key, s, 1024+16*int64(len(key)))
	}
	return s
}

// commandKey names a command argument unambiguously: a string, or a list
// of strings with each one's length before it; ok is false for any other
// value, whose analysis is an error made at once.
func commandKey(v *structpb.Value) (string, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return "s" + k.StringValue, true
	case *structpb.Value_ListValue:
		buf := []byte{'a'}
		for _, e := range k.ListValue.GetValues() {
			s, ok := e.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return "", false
			}
			buf = appendString(buf, s.StringValue)
		}
		return string(buf), true
	}
	return "", false
}
