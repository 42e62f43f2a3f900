package decisionlog

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// A bundle's mask rules (OPA's system.log.mask) name places in a decision
// line by JSON pointer. The pointer semantics follow OPA's
// v1/plugins/logs/mask.go (whose types are not exported): the first segment
// is "input" or "result", segments are path-unescaped, array elements are
// named by index, a pointer to a missing place does nothing, and the line
// lists what it erased and masked.

// applyMasks applies a bundle's mask rules to a line in place.
func applyMasks(line map[string]any, rules []any) error {
	var errs []error
	for _, r := range rules {
		if err := maskPointer(line, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// maskPointer applies one mask rule: a pointer string (erase) or an
// {"op": "remove"|"upsert", "path", "value"} object.
func maskPointer(line map[string]any, rule any) error {
	op, path, value := "remove", "", any(nil)
	switch r := rule.(type) {
	case string:
		path = r
	case map[string]any:
		path, _ = r["path"].(string)
		if o, ok := r["op"].(string); ok {
			op = o
		}
		value = r["value"]
	default:
		return fmt.Errorf("mask rule %v is not a pointer or an object", rule)
	}
	if op != "remove" && op != "upsert" {
		return fmt.Errorf("mask rule %q: op %q is not remove or upsert", path, op)
	}
	parts, err := maskPath(path)
	if err != nil {
		return err
	}
	done := false
	if len(parts) == 1 {
		if op == "remove" {
			delete(line, parts[0])
		} else {
			line[parts[0]] = value
		}
		done = true
	} else if parent, ok := walk(line[parts[0]], parts[1:len(parts)-1], op == "upsert"); ok {
		done = setOrDelete(parent, parts[len(parts)-1], op == "remove", value)
	}
	if done {
		key := map[string]string{"remove": "erased", "upsert": "masked"}[op]
		list, _ := line[key].([]any)
		line[key] = append(list, "/"+strings.Join(parts, "/"))
	}
	return nil
}

// maskPath splits a pointer into unescaped segments; its first must be
// input or result.
func maskPath(path string) ([]string, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("mask %q is not slash-prefixed", path)
	}
	parts := strings.Split(path[1:], "/")
	if parts[0] != "input" && parts[0] != "result" {
		return nil, fmt.Errorf("mask %q: prefix %q is not input or result", path, parts[0])
	}
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("mask %q: %w", path, err)
		}
		parts[i] = u
	}
	return parts, nil
}

// walk follows segments from node; with create, missing objects are made.
func walk(node any, segs []string, create bool) (any, bool) {
	for _, s := range segs {
		switch n := node.(type) {
		case map[string]any:
			child, ok := n[s]
			if !ok {
				if !create {
					return nil, false
				}
				child = map[string]any{}
				n[s] = child
			}
			node = child
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// setOrDelete removes or sets key in an object or array. A removed array
// element becomes null (OPA shortens the array instead).
func setOrDelete(node any, key string, remove bool, value any) bool {
	switch n := node.(type) {
	case map[string]any:
		if _, ok := n[key]; !ok && remove {
			return false
		}
		if remove {
			delete(n, key)
		} else {
			n[key] = value
		}
		return true
	case []any:
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(n) {
			return false
		}
		if remove {
			n[i] = nil
		} else {
			n[i] = value
		}
		return true
	}
	return false
}
