package toolpdp.text_test

import data.toolpdp.text
import rego.v1

test_short_text_is_kept if {
	text.clip("git push") == "git push"
}

test_long_text_is_cut_with_an_ellipsis if {
	long := concat("", [x | some _ in numbers.range(1, 1000); x := "ab"])
	clipped := text.clip(long)
	count(clipped) == text.max_quote + 1
	endswith(clipped, "…")
	startswith(long, trim_suffix(clipped, "…"))
}

test_cut_counts_characters_not_bytes if {
	long := concat("", [x | some _ in numbers.range(1, 500); x := "é"])
	count(text.clip(long)) == text.max_quote + 1
}
