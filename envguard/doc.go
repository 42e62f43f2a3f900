// Package envguard turns what a tool call names into facts a policy can check:
// canonical paths (every symlink followed, `.` and `..` cleaned) and the leaf
// commands of a shell command line. It decides nothing and imports nothing of
// toolpdp's; the Rego library decides.
package envguard
