package askview

import (
	"bytes"
	"encoding/json"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// definitionChange is an ask about a changed MCP tool definition as a
// person is shown it: both definitions indented, keys sorted, every
// character visible, so that the two read side by side line for line.
func definitionChange(c *pb.ToolDefinitionChange) *pb.ToolDefinitionChange {
	if c == nil {
		return nil
	}
	return &pb.ToolDefinitionChange{Server: Visible(c.GetServer()), Tool: Visible(c.GetTool()),
		KeptDigest: Visible(c.GetKeptDigest()), NewDigest: Visible(c.GetNewDigest()),
		KeptDefinition: definitionJSON(c.GetKeptDefinition()), NewDefinition: definitionJSON(c.GetNewDefinition())}
}

// definitionJSON renders canonical JSON indented; what does not read as
// JSON is shown as text.
func definitionJSON(canonical string) string {
	dec := json.NewDecoder(bytes.NewReader([]byte(canonical)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return Visible(canonical)
	}
	return JSON(v)
}
