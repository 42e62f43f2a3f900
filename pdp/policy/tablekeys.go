package policy

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/toolpdp/toolpdp/envguard"
)

// libraryTablesGo are the tables of data.toolpdp.tables the policy package
// decodes itself; envguard.Tables are the shell analysis' own.
type libraryTablesGo struct {
	FileTools  map[string]fileTool `json:"file_tools"`
	ShellTools map[string][]string `json:"shell_tools"`
	Categories map[string]string   `json:"builtin_categories"`
	Misnamed   map[string]string   `json:"guardrail_names_not_read"`
	Custom     string              `json:"custom_tool_server"`
}

// regoTableKeys are the tables only the Rego library reads
// (data.toolpdp.tables.<key>); TestRegoTableKeys keeps the list in step
// with the library's sources.
var regoTableKeys = []string{"custom_tool_server", "protected_names", "safe_env_vars"}

// unknownTableKeys names every key of the library's tables (raw, as
// decoded from JSON) that no reader knows, at any depth, with the known key
// it is closest to. Decoding would drop such a key: a misspelt table
// ("wraper") would silently be no table, and the commands it describes
// would be analysed as if nobody had written it. Keys beginning with x-
// are the owners' own, as in agent definitions.
func unknownTableKeys(raw map[string]any) []string {
	goTypes := map[string]reflect.Type{}
	for _, t := range []reflect.Type{reflect.TypeFor[envguard.Tables](), reflect.TypeFor[libraryTablesGo]()} {
		for name, f := range jsonFields(t) {
			goTypes[name] = f
		}
	}
	known := slices.Clone(regoTableKeys)
	for name := range goTypes {
		known = append(known, name)
	}
	sort.Strings(known)
	var out []string
	for _, k := range sortedKeys(raw) {
		if t, ok := goTypes[k]; ok {
			out = append(out, unknownKeysIn("toolpdp.tables."+k, raw[k], t)...)
		} else if !slices.Contains(regoTableKeys, k) {
			out = append(out, unknownKeyMessage("toolpdp.tables."+k, k, known))
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// unknownKeysIn walks v (decoded JSON) along the Go type it decodes into.
func unknownKeysIn(where string, v any, t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a type mismatch: decoding reports it
		}
		fields := jsonFields(t)
		known := make([]string, 0, len(fields))
		for name := range fields {
			known = append(known, name)
		}
		sort.Strings(known)
		for _, k := range sortedKeys(obj) {
			if ft, ok := fields[k]; ok {
				out = append(out, unknownKeysIn(where+"."+k, obj[k], ft)...)
			} else {
				out = append(out, unknownKeyMessage(where+"."+k, k, known))
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range sortedKeys(obj) {
			out = append(out, unknownKeysIn(fmt.Sprintf("%s[%q]", where, k), obj[k], t.Elem())...)
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, e := range list {
			out = append(out, unknownKeysIn(fmt.Sprintf("%s[%d]", where, i), e, t.Elem())...)
		}
	}
	return out
}

// unknownKeyMessage is an unknown key's error text, worded as agent
// definitions word theirs; "" for an owner's own x- key.
func unknownKeyMessage(where, key string, known []string) string {
	if strings.HasPrefix(key, "x-") {
		return ""
	}
	if m := closest(key, known); m != "" {
		return fmt.Sprintf("%s: unknown key (did you mean %q?)", where, m)
	}
	return fmt.Sprintf("%s: unknown key; the keys known here are %s", where, strings.Join(known, ", "))
}

// jsonFields are t's fields by the JSON name they decode from.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
