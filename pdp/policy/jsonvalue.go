package policy

import "encoding/json"

// Bundle data holds JSON numbers as json.Number (OPA's loader keeps them
// exact); these helpers read them whatever their Go type.

func isNumber(v any) bool {
	_, ok := toFloat(v)
	return ok
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}
