package decisionrun

import (
	"strings"
	"testing"
)

// A decision-test file is read strictly: keys equal ignoring case are
// refused naming the key, in JSON and in YAML.
func TestParseStrict(t *testing.T) {
	for name, body := range map[string]string{
		"a.decisions.json": `{"name":"x","steps":[{"request":{"tool_name":"Read"},"REQUEST":{"tool_name":"Bash"}}]}`,
		"a.decisions.yaml": "name: x\nsteps:\n  - request: {tool_name: Read}\n    REQUEST: {tool_name: Bash}\n",
	} {
		_, err := Parse(name, []byte(body))
		if err == nil || !strings.Contains(err.Error(), `steps[0].request: the key "request" equals the key "REQUEST" ignoring case`) &&
			!strings.Contains(err.Error(), `steps[0].REQUEST: the key "REQUEST" equals the key "request" ignoring case`) {
			t.Errorf("%s: %v: want the case-variant key named", name, err)
		}
	}
	if _, err := Parse("b.decisions.json", []byte(`{"name":"x","steps":[]} {}`)); err == nil || !strings.Contains(err.Error(), "data after") {
		t.Errorf("trailing data: %v", err)
	}
}
