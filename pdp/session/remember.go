package session

import (
	"crypto/sha256"
	"encoding/json"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A remembered approval (Confirm with remember) is bound to exactly the call
// a person saw — not a prefix, not a tool: the same canonical tool
// (mcp__S__X and X from server S are one tool), the same args with keys
// sorted and numbers normalised, the same env and call-site execution
// policy, and an ask from the same rules. RememberKey is a digest of those,
// so a session's remembered approvals are a fixed size each.
type RememberKey [sha256.Size]byte

// KeyOf is the key of an ask; ok is false for a call that cannot be
// written canonically (a number that is not JSON), which is never remembered.
func KeyOf(req *pb.DecideRequest, resp *pb.DecideResponse) (key RememberKey, ok bool) {
	server, name := canonicalTool(req.GetToolName(), req.GetServer())
	var rules []string
	for _, r := range resp.GetReasons() {
		if r.GetEffect() == pb.Decision_DECISION_ASK {
			rules = append(rules, r.GetAxis()+"\x00"+r.GetRule())
		}
	}
	sort.Strings(rules)
	doc := map[string]any{"server": server, "tool": name, "args": req.GetArgs().AsMap(), "env": req.GetEnv(), "rules": rules}
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

// canonicalTool is the (server, bare name) of a call, as the permission
// axis makes it canonical: mcp__S__X with server "" or "S" is tool X of S.
// A contradicting or malformed name is returned as it came: such a call is
// denied and never remembered.
func canonicalTool(name, server string) (string, string) {
	if server != "" {
		if !strings.HasPrefix(name, "mcp__") {
			return server, name
		}
		if rest, ok := strings.CutPrefix(name, "mcp__"+server+"__"); ok && rest != "" {
			return server, rest
		}
	}
	tail, isMCP := strings.CutPrefix(name, "mcp__")
	if !isMCP {
		return "", name
	}
	if i := strings.Index(tail, "__"); i > 0 && tail[i+2:] != "" && (server == "" || server == tail[:i]) {
		return tail[:i], tail[i+2:]
	}
	return server, name
}
