package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A pinned definition outlives the process that pinned it when sessions
// live in a durable or shared store: it is written as the definition
// itself, not as a reference into a snapshot, so a session keeps its pin
// although the bundle changed while the process was down. Its digest
// names it: the same definition, loaded twice, has one digest.

// pinDoc is the encoded form of an Agent.
type pinDoc struct {
	ID         string           `json:"id"`
	Index      any              `json:"index"`
	Own        any              `json:"own_guardrails,omitempty"`
	Workspace  string           `json:"workspace,omitempty"`
	MaxDenials int              `json:"max_consecutive_denials,omitempty"`
	Policy     *ExecutionPolicy `json:"execution_policy,omitempty"`
	Args       []pinnedArgs     `json:"args,omitempty"` // the argument constraints as written; compiled again on decoding
}

// encoded is an Agent's encoding and digest, worked out once.
type encoded struct {
	once   sync.Once
	body   []byte
	digest [sha256.Size]byte
	err    error
}

// Encoded is the definition as a session store keeps it, and its digest
// (the SHA-256 of that encoding). Computed once per definition.
func (a *Agent) Encoded() ([]byte, [sha256.Size]byte, error) {
	a.enc.once.Do(func() {
		doc := pinDoc{ID: a.ID, Workspace: a.Workspace, MaxDenials: a.MaxDenials, Policy: a.Policy}
		if a.Args != nil {
			doc.Args = a.Args.docs
		}
		var err error
		if doc.Index, err = ast.JSON(a.Index); err != nil {
			a.enc.err = fmt.Errorf("agent '%s': encode its index entry: %w", a.ID, err)
			return
		}
		if a.ownGuardrails != nil {
			if doc.Own, err = ast.JSON(a.ownGuardrails); err != nil {
				a.enc.err = fmt.Errorf("agent '%s': encode its own guardrails: %w", a.ID, err)
				return
			}
		}
		// encoding/json sorts object keys: equal definitions encode alike.
		if a.enc.body, err = json.Marshal(doc); err != nil {
			a.enc.err = fmt.Errorf("agent '%s': %w", a.ID, err)
			return
		}
		a.enc.digest = sha256.Sum256(a.enc.body)
	})
	return a.enc.body, a.enc.digest, a.enc.err
}

// DecodeAgent is the definition Encoded wrote.
func DecodeAgent(body []byte) (*Agent, error) {
	var doc pinDoc
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("a pinned definition: %w", err)
	}
	a := &Agent{ID: doc.ID, Definition: Definition{Workspace: doc.Workspace, MaxDenials: doc.MaxDenials, Policy: doc.Policy}}
	var err error
	if a.Args, err = decodeArgConstraints(doc.Args); err != nil {
		return nil, fmt.Errorf("agent '%s': pinned %w", doc.ID, err)
	}
	if a.Index, err = astValue(doc.Index); err != nil {
		return nil, fmt.Errorf("agent '%s': pinned index entry: %w", doc.ID, err)
	}
	if a.ownGuardrails, err = astValue(doc.Own); err != nil {
		return nil, fmt.Errorf("agent '%s': pinned own guardrails: %w", doc.ID, err)
	}
	a.enc.once.Do(func() { a.enc.body, a.enc.digest = body, sha256.Sum256(body) })
	return a, nil
}

// astValue turns a decoded JSON document (numbers as json.Number) into the
// value OPA reads.
func astValue(v any) (ast.Value, error) { return ast.InterfaceToValue(v) }
