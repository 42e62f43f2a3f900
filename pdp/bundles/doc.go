// Package bundles reads the bundles a policy is built from — directories,
// `opa build` tarballs, the embedded library and default agent, and http(s)
// bundle servers polled with ETags — into immutable values, and announces
// when they may have changed (Watch). Every read is bounded as a whole
// (Limits) and reads only regular files, so no bundle can stall or
// exhaust the process before policy sees it. It knows nothing of what a
// bundle means: that is package policy.
package bundles
