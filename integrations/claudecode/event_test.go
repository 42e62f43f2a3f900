package claudecode

import (
	"encoding/json"
	"strings"
	"testing"
)

// What a PostToolUse says about its tool, in the shapes tools answer with.
// (The hook end to end, through a real server: cmd/toolpdp/hook_test.go.)
func TestToolFailed(t *testing.T) {
	cases := []struct {
		event, response string
		failed          bool
		msg             string
	}{
		{PostToolUse, `{"filePath": "/a", "success": true}`, false, ""},
		{PostToolUse, `{"stdout": "ok", "stderr": "", "interrupted": false, "isImage": false}`, false, ""},
		{PostToolUse, `{"success": false, "error": "disk full"}`, true, "disk full"},
		{PostToolUse, `{"is_error": true, "content": "boom"}`, true, "boom"},
		{PostToolUse, `{"isError": true, "content": [{"type": "text", "text": "403"}]}`, true, "403"},
		{PostToolUse, `{"error": "not found"}`, true, "not found"},
		{PostToolUse, `[{"type": "text", "text": "isError"}]`, false, ""},
		{PostToolUse, `"plain text"`, false, ""},
		{PostToolUse, ``, false, ""},
	}
	for _, c := range cases {
		ev := &Event{HookEventName: c.event, ToolResponse: json.RawMessage(c.response)}
		failed, msg := toolFailed(ev)
		if failed != c.failed || msg != c.msg {
			t.Errorf("%s %s: failed %v %q; want %v %q", c.event, c.response, failed, msg, c.failed, c.msg)
		}
	}
	if failed, msg := toolFailed(&Event{HookEventName: PostToolUseFailure, Error: "exit 1"}); !failed || msg != "exit 1" {
		t.Errorf("PostToolUseFailure: %v %q", failed, msg)
	}
	if failed, msg := toolFailed(&Event{HookEventName: PostToolUseFailure, IsInterrupt: true}); !failed || !strings.Contains(msg, "interrupted") {
		t.Errorf("an interrupt: %v %q", failed, msg)
	}
}

func TestParseEvent(t *testing.T) {
	ok := `{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/a"}, "tool_use_id": "t"}`
	if ev, err := ParseEvent(strings.NewReader(ok)); err != nil || ev.ToolName != "Read" {
		t.Fatalf("%v %v", ev, err)
	}
	if _, err := ParseEvent(strings.NewReader(`{"session_id": "s", "hook_event_name": "SessionEnd", "reason": "clear"}`)); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"":                                  "no hook event",
		"{":                                 "not a JSON object",
		ok + ok:                             "data after",
		`{"hook_event_name": "Stop"}`:       `"Stop" is not handled`,
		`{"tool_name": "Read"}`:             "hook_event_name: required",
		strings.Replace(ok, `"t"`, `""`, 1): "tool_use_id: required",
		strings.Replace(ok, `{"file_path": "/a"}`, `["/a"]`, 1):                                      "tool_input: not a JSON object",
		`{"hook_event_name": "SessionEnd"}`:                                                          "session_id: required",
		`{"hook_event_name": "PreToolUse", "session_id": 7}`:                                         "not a JSON object",
		strings.Repeat(" ", MaxEventBytes+1):                                                         "larger than",
		strings.Replace(ok, `"file_path": "/a"`, `"file_path": "/a", "FILE_PATH": "/etc/shadow"`, 1): `tool_input.FILE_PATH: the key "FILE_PATH" equals the key "file_path" ignoring case`,
		strings.Replace(ok, `"tool_name": "Read"`, `"tool_name": "Read", "tool_name": "Bash"`, 1):    `tool_name: the key "tool_name" appears twice`,
		strings.Replace(ok, `"/a"`, "\"/a\xff\"", 1):                                                 "not valid UTF-8",
	} {
		if _, err := ParseEvent(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60q: %v; want an error with %q", in, err, want)
		}
	}
}
