package envguard

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Tables that do not compile are an error for every analysis and every rule
// made with them, never the empty tables: an analysis with no table would
// see less than the tables meant.
func TestTablesThatDoNotCompileAreAnError(t *testing.T) {
	bad := func() *Tables {
		return &Tables{ExecOptions: map[string][]ExecOption{"vim": {{Option: "-c", Safe: []string{"(unclosed"}}}}}
	}
	if err := bad().Validate(); err == nil || !strings.Contains(err.Error(), `exec_options["vim"][0].safe`) {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := bad().Analyze(context.Background(), "vim -c ':!curl x' f"); !errors.Is(err, ErrUncheckable) || !strings.Contains(err.Error(), "do not compile") {
		t.Errorf("Analyze: %v, want an uncheckable command", err)
	}
	if _, err := bad().AnalyzeArgv(context.Background(), []string{"vim", "f"}); !errors.Is(err, ErrUncheckable) {
		t.Errorf("AnalyzeArgv: %v, want an uncheckable command", err)
	}
	if _, err := bad().CompileRules([]string{"curl"}, nil); err == nil {
		t.Error("CompileRules: no error")
	}
	tables := bad()
	_, _ = tables.Analyze(context.Background(), "true")
	if _, err := tables.Analyze(context.Background(), "true"); !errors.Is(err, ErrUncheckable) {
		t.Errorf("a second Analyze: %v, want the same error, not tables compiled empty the first time", err)
	}
}
