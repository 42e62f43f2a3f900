package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/toolpdp/toolpdp/envguard"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// secretsTimeout bounds the analysis of a command whose secrets are
// looked for; almost always the decision's own analysis is kept and this
// costs a lookup.
const secretsTimeout = 100 * time.Millisecond

// CommandSecrets are the literal secret values in a shell call's commands:
// the arguments the secret_arguments table names and the values of
// assignments before a program whose name secretName calls secret, found
// in the parsed command (through wrappers and shell scripts), not by
// patterns over its text; a command that does not parse is read as plain
// words instead. It is nil for any other call.
func (s *Snapshot) CommandSecrets(req *pb.DecideRequest, secretName func(string) bool) []string {
	if s == nil {
		return nil
	}
	names, ok := s.tables.shellTools[req.GetToolName()]
	if !ok || s.shellMemo == nil || s.secretTables == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), secretsTimeout)
	defer cancel()
	var out []string
	for _, name := range names {
		v, ok := argAt(req.GetArgs(), name)
		if !ok {
			continue
		}
		switch a := s.shellMemo.analyze(ctx, v); {
		case a.err == nil:
			out = append(out, s.secretTables.Secrets(ctx, a.a, secretName)...)
		case v.GetStringValue() != "":
			out = append(out, s.secretTables.TextSecrets(v.GetStringValue(), secretName)...)
		}
	}
	return out
}

// withBundleSecretArguments are the library's shell tables with the
// bundles' data.guardrails.secret_arguments added to its own (a bundle
// masks more, never less), decoded strictly and validated as the
// library's entries are.
func withBundleSecretArguments(lib *envguard.Tables, data map[string]any, fileOf func(...string) string) (*envguard.Tables, error) {
	g, _ := data["guardrails"].(map[string]any)
	raw, ok := g["secret_arguments"]
	if !ok {
		return lib, nil
	}
	where := fileOf("guardrails", "secret_arguments")
	enc, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: guardrails.secret_arguments: %w", where, err)
	}
	var extra map[string][]envguard.SecretArg
	dec := json.NewDecoder(bytes.NewReader(enc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&extra); err != nil {
		return nil, fmt.Errorf("%s: guardrails.secret_arguments: want an object of programs to lists of entries (option, attached_only, after, prefix, subcommand, operand_after_name, names, last_operand_with): %w", where, err)
	}
	merged := maps.Clone(lib.SecretArguments)
	if merged == nil {
		merged = map[string][]envguard.SecretArg{}
	}
	for _, prog := range slices.Sorted(maps.Keys(extra)) {
		merged[prog] = append(slices.Clip(merged[prog]), extra[prog]...)
	}
	// Only the secret arguments differ: the compiled rest is shared.
	out := lib.WithSecretArguments(merged)
	if err := out.ValidateSecretArguments(); err != nil {
		return nil, fmt.Errorf("%s: guardrails.%w", where, err)
	}
	return out, nil
}
