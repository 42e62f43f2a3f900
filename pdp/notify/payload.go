package notify

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/toolpdp/toolpdp/pdp/askview"
	"github.com/toolpdp/toolpdp/pdp/policy"
)

// payload is the JSON body of a notification. Every field that came from
// the caller is as approvers see it: masked, every character visible.
type payload struct {
	Event      string   `json:"event"` // "ask" or "answer"
	DecisionID string   `json:"decision_id"`
	Workspace  string   `json:"workspace,omitempty"`
	AgentID    string   `json:"agent_id"`
	SessionID  string   `json:"session_id"`
	CallID     string   `json:"call_id,omitempty"`
	ToolName   string   `json:"tool_name"`
	Server     string   `json:"server,omitempty"`
	Message    string   `json:"message"`
	Reasons    []reason `json:"reasons,omitempty"`
	Arguments  string   `json:"arguments"` // masked; cut at MaxArgumentBytes
	Truncated  bool     `json:"arguments_truncated"`
	Secrets    []string `json:"secrets,omitempty"`     // where values were masked
	Decision   string   `json:"decision,omitempty"`    // an answer's: allow or deny
	AnsweredBy string   `json:"answered_by,omitempty"` // an answer's
	ConsoleURL string   `json:"console_url,omitempty"`
	Text       string   `json:"text"` // for a Slack incoming webhook
	Created    int64    `json:"created_unix_nanos"`
}

type reason struct {
	Axis    string `json:"axis"`
	Rule    string `json:"rule"`
	Effect  string `json:"effect"`
	Message string `json:"message"`
}

func (n *Notifier) payload(ev Event) payload {
	a := ev.Ask
	args, cut := askview.Cut(a.Arguments, MaxArgumentBytes)
	p := payload{Event: "ask", DecisionID: a.DecisionId, Workspace: askview.Visible(ev.Workspace), AgentID: a.AgentId, SessionID: a.SessionId, CallID: a.CallId,
		ToolName: a.ToolName, Server: a.Server, Message: a.Message, Arguments: args, Truncated: cut || a.ArgumentsTruncated, Secrets: a.Secrets,
		Created: a.CreatedUnixNanos}
	for _, r := range a.Reasons {
		p.Reasons = append(p.Reasons, reason{Axis: r.Axis, Rule: r.Rule, Effect: policy.EffectName(r.Effect), Message: r.Message})
	}
	if ev.Answered {
		p.Event, p.Decision, p.AnsweredBy = "answer", policy.EffectName(ev.Decision), askview.Visible(ev.AnsweredBy)
	}
	if n.cfg.ConsoleURL != "" {
		p.ConsoleURL = strings.TrimRight(n.cfg.ConsoleURL, "/") + "/#ask-" + url.PathEscape(a.DecisionId)
	}
	p.Text = slackText(p)
	return p
}

// slackText is what a Slack incoming webhook shows: the caller's text in
// code spans, escaped for Slack's markup (&, <, > — so no <!channel> or
// <url|label> can be injected; a backtick would end the span, so it is
// shown as ˋ).
func slackText(p payload) string {
	var b strings.Builder
	if p.Event == "answer" {
		fmt.Fprintf(&b, "*toolpdp*: %s answered %s to `%s`", slackCode(p.AnsweredBy), p.Decision, slackCode(p.ToolName))
	} else {
		fmt.Fprintf(&b, "*toolpdp*: agent `%s` asks to run `%s`", slackCode(p.AgentID), slackCode(p.ToolName))
	}
	if p.Server != "" {
		fmt.Fprintf(&b, " of server `%s`", slackCode(p.Server))
	}
	fmt.Fprintf(&b, " (session `%s`, decision `%s`)\n", slackCode(p.SessionID), slackCode(p.DecisionID))
	if p.Event == "ask" {
		fmt.Fprintf(&b, "Why: `%s`\n", slackCode(p.Message))
		fmt.Fprintf(&b, "```%s```\n", slackCode(p.Arguments))
		if p.Truncated {
			b.WriteString("(arguments cut short here: the console shows them whole)\n")
		}
		if len(p.Secrets) > 0 {
			fmt.Fprintf(&b, "Secrets masked: `%s`\n", slackCode(strings.Join(p.Secrets, ", ")))
		}
	}
	if p.ConsoleURL != "" {
		fmt.Fprintf(&b, "<%s|Answer in the console>", slackEscape(p.ConsoleURL))
	}
	return b.String()
}

// slackEscape escapes what Slack's markup reads as control: &, < and >.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func slackCode(s string) string {
	return strings.ReplaceAll(slackEscape(s), "`", "ˋ")
}
