# Package toolpdp.text shapes the caller's text that messages quote.
package toolpdp.text

import rego.v1

# max_quote is how many characters of the caller's text a message quotes:
# a command, a path or a list of roots can be megabytes, and a message is
# shown to a model, held with a pending ask and written to the decision log.
max_quote := 160

# clip is s cut to max_quote characters, "…" marking the cut. Use it on
# every caller-supplied value a sprintf puts in a message.
clip(s) := s if count(s) <= max_quote

clip(s) := concat("", [substring(s, 0, max_quote), "…"]) if count(s) > max_quote
