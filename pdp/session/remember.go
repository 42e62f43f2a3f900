package session

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"sort"

	"google.golang.org/protobuf/proto"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A remembered approval (Confirm with remember) is bound to exactly the call
// a person saw — not a prefix, not a tool: the same canonical tool
// (mcp__S__X and X from server S are one tool), the same args with keys
// sorted and numbers normalised, the same env, call-site execution
// policy and confined flag, and an ask from the same rules. RememberKey is a digest of those,
// so a session's remembered approvals are a fixed size each.
type RememberKey [sha256.Size]byte

// KeyOf is the key of an ask of tool (server, name), as the policy names
// it canonically; ok is false for a call that cannot be written
// canonically (a number that is not JSON), which is never remembered.
func KeyOf(server, name string, req *pb.DecideRequest, resp *pb.DecideResponse) (key RememberKey, ok bool) {
	var rules []string
	for _, r := range resp.GetReasons() {
		if r.GetEffect() == pb.Decision_DECISION_ASK {
			rules = append(rules, r.GetAxis()+"\x00"+r.GetRule())
		}
	}
	sort.Strings(rules)
	doc := map[string]any{"server": server, "tool": name, "args": req.GetArgs().AsMap(), "env": req.GetEnv(), "rules": rules}
	if req.GetConfined() {
		// A call that runs confined may have been approved for that alone:
		// the same call unconfined is another call.
		doc["confined"] = true
	}
	if p := req.GetExecutionPolicy(); p != nil {
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			return key, false
		}
		doc["execution_policy"] = raw
	}
	raw, err := json.Marshal(doc) // map keys sorted; float64s in their shortest form
	if err != nil {
		return key, false
	}
	return sha256.Sum256(raw), true
}

// CallSig is a digest of a call as written: tool, server, args, env and
// call-site execution policy.
type CallSig [sha256.Size]byte

// CallSignature is the digest two decisions sharing a call id are compared
// by: a framework that retries a call sends the same one; anything else
// reusing the id is another call, and the id then names neither.
func CallSignature(req *pb.DecideRequest) CallSig {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.DecideRequest{
		ToolName: req.GetToolName(), Server: req.GetServer(), Args: req.GetArgs(), Env: req.GetEnv(), ExecutionPolicy: req.GetExecutionPolicy(),
		Confined: req.GetConfined(),
	})
	var sig CallSig
	if err != nil {
		// Not writable: a signature of its own, unlike any other call's.
		_, _ = rand.Read(sig[:])
		return sig
	}
	return sha256.Sum256(raw)
}
