package report

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The refusals of Read and Head. Each error they return wraps one of these
// and names the field, what it holds and what was expected:
// "results[0].hold_ms: out of its domain: got -0.005, want a number of 0
// or more".
var (
	ErrNotDocument       = errors.New("not a result document of mmlab")
	ErrNewerSchema       = errors.New("newer than this mmlab reads")
	ErrUnknownExperiment = errors.New("an experiment this mmlab does not know")
	ErrType              = errors.New("wrong type")
	ErrMissing           = errors.New("missing")
	ErrDomain            = errors.New("out of its domain")
)

// Head returns the experiment of the document b, which must be a JSON
// object with a string "experiment" and a schema_version from 1 (or none:
// version 1) to SchemaVersion.
func Head(b []byte) (experiment string, err error) {
	obj, err := parseObject(b)
	if err != nil {
		return "", err
	}
	return head(obj)
}

// Read checks the document b against Document[P, R], the types of an
// experiment's params (P) and results (R), and decodes it. Every field
// that the type always writes (no omitempty or omitzero) must be there;
// an embedded pointer's fields are all there or none. Each value has its
// field's JSON type; null is taken for a list, a map or an omitempty
// pointer, as encoding/json writes their nil; a map with integer keys
// has keys that are whole numbers of its key type, as encoding/json writes
// them. Every number is a count, a size, a time, a rate or a ratio: none
// is negative, except in a float field tagged `report:"signed"` (a
// difference), and one of an integer field, or of a float field tagged
// `report:"count"`, is a whole number.
// Keys it does not know are ignored, so that a field a newer mmlab adds
// within the same schema_version reads (a change that an older reader
// would misread raises the version, which Head refuses), but not one that
// differs from a field's name only in case, which json.Unmarshal would
// give to that field.
func Read[P, R any](b []byte) (*Document[P, R], error) {
	obj, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	if _, err := head(obj); err != nil {
		return nil, err
	}
	var doc Document[P, R]
	if err := checkFields(obj, reflect.TypeOf(doc), ""); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrType, err)
	}
	return &doc, nil
}

// parseObject decodes b, one JSON object, with its numbers as written.
func parseObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotDocument, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: more after the JSON value", ErrNotDocument)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: got %s, want a JSON object", ErrNotDocument, got(v))
	}
	return obj, nil
}

func head(obj map[string]any) (string, error) {
	exp, ok := obj["experiment"].(string)
	if !ok || exp == "" {
		return "", fmt.Errorf("%w: experiment: got %s, want the experiment's name", ErrNotDocument, got(obj["experiment"]))
	}
	if v, ok := obj["schema_version"]; ok {
		n, isNum := v.(json.Number)
		version, err := strconv.Atoi(string(n))
		switch {
		case !isNum:
			return "", fmt.Errorf("schema_version: %w: got %s, want a whole number", ErrType, got(v))
		case err != nil || version < 1:
			return "", fmt.Errorf("schema_version: %w: got %s, want 1 to %d", ErrDomain, n, SchemaVersion)
		case version > SchemaVersion:
			return "", fmt.Errorf("schema_version: %w: got %d, want 1 to %d", ErrNewerSchema, version, SchemaVersion)
		}
	}
	return exp, nil
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// field is a field of a struct as encoding/json writes it.
type field struct {
	name     string
	typ      reflect.Type
	optional bool   // omitempty or omitzero
	domain   string // its report tag: "count" for a float that counts, "signed" for a difference
	// group is 0, or the number of the embedded pointer the field comes
	// from: a nil one writes none of its fields, a set one all.
	group int
}

// fields lists the fields of the struct type t, those of embedded structs
// as its own, as encoding/json writes them.
func fields(t reflect.Type, group int, list []field) []field {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if ft := f.Type; f.Anonymous && name == "" {
			g := group
			if ft.Kind() == reflect.Pointer {
				ft, g = ft.Elem(), len(list)+1
			}
			if ft.Kind() == reflect.Struct {
				list = fields(ft, g, list)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		list = append(list, field{name, f.Type, optional, f.Tag.Get("report"), group})
	}
	return list
}

// checkFields checks the object obj against the struct type t.
func checkFields(obj map[string]any, t reflect.Type, path string) error {
	list := fields(t, 0, nil)
	there := map[int]bool{} // the groups with a field in obj
	for _, f := range list {
		if _, ok := obj[f.name]; ok {
			there[f.group] = true
		}
	}
	for _, f := range list {
		if f.group != 0 && !there[f.group] || path == "" && f.name == "schema_version" { // head checked it: none is version 1
			continue
		}
		at := join(path, f.name)
		v, ok := obj[f.name]
		if !ok && f.optional {
			continue
		}
		if !ok || v == nil && f.typ.Kind() == reflect.Pointer && !f.optional {
			return fmt.Errorf("%s: %w: want %s", at, ErrMissing, want(f.typ, f.domain))
		}
		if err := check(v, f.typ, at, f.domain); err != nil {
			return err
		}
	}
	// json.Unmarshal gives a key that differs from a field's name only in
	// case to the field, which would set it unchecked.
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		for _, f := range list {
			if key != f.name && strings.EqualFold(key, f.name) {
				return fmt.Errorf("%s: %w: got the key %q, want %q", join(path, key), ErrType, key, f.name)
			}
		}
	}
	return nil
}

// check checks the JSON value v against the Go type t of a field whose
// report tag is domain.
func check(v any, t reflect.Type, path string, domain string) error {
	if v == nil {
		switch t.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
			return nil
		}
		return fmt.Errorf("%s: %w: got null, want %s", path, ErrType, want(t, domain))
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrongType := func() error { return fmt.Errorf("%s: %w: got %s, want %s", path, ErrType, got(v), want(t, domain)) }
	pt := reflect.PointerTo(t)
	if pt.Implements(textUnmarshaler) {
		s, ok := v.(string)
		if !ok {
			return wrongType()
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return fmt.Errorf("%s: %w: got %s: %v", path, ErrDomain, got(v), err)
		}
		return nil
	}
	k := t.Kind()
	if isNumber(k) {
		n, ok := v.(json.Number)
		if !ok {
			return wrongType()
		}
		if !inDomain(string(n), t, domain) {
			return fmt.Errorf("%s: %w: got %s, want %s", path, ErrDomain, n, want(t, domain))
		}
		return nil
	}
	switch k {
	case reflect.Interface:
		return nil
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrongType()
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return wrongType()
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok || k == reflect.Array && len(list) != t.Len() {
			return wrongType()
		}
		for i, e := range list {
			if err := check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), domain); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		kk := t.Key().Kind()
		if !ok || kk != reflect.String && !isInteger(kk) {
			return wrongType()
		}
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			// encoding/json writes an integer key in decimal (a CPU's
			// number, say).
			if isInteger(kk) && !inDomain(key, t.Key(), "") {
				return fmt.Errorf("%s: %w: got the key %q, want %s", join(path, key), ErrDomain, key, want(t.Key(), ""))
			}
			if err := check(obj[key], t.Elem(), join(path, key), domain); err != nil {
				return err
			}
		}
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return wrongType()
		}
		return checkFields(obj, t, path)
	default:
		return fmt.Errorf("%s: %w: a %v field is not of the schema", path, ErrType, t)
	}
	return nil
}

func isNumber(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Float64 }

func isInteger(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Uintptr }

// inDomain says whether the JSON number s is one that the number type t
// of a field with the report tag domain takes: none is negative but a
// difference ("signed"); one of an integer type, or a "count", is whole.
func inDomain(s string, t reflect.Type, domain string) bool {
	z := reflect.New(t).Elem()
	switch k := t.Kind(); {
	case reflect.PointerTo(t).Implements(jsonUnmarshaler): // experiment.Duration: milliseconds, maybe a fraction
		x, err := strconv.ParseFloat(s, 64)
		return err == nil && x >= 0
	case k >= reflect.Int && k <= reflect.Int64:
		x, err := strconv.ParseInt(s, 10, 64)
		return err == nil && x >= 0 && !z.OverflowInt(x)
	case k >= reflect.Uint && k <= reflect.Uintptr:
		x, err := strconv.ParseUint(s, 10, 64)
		return err == nil && !z.OverflowUint(x)
	}
	x, err := strconv.ParseFloat(s, 64)
	return err == nil && (x >= 0 || domain == "signed") && (domain != "count" || x == math.Trunc(x)) && !z.OverflowFloat(x)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// want says in words what JSON the Go type t of a field with the report
// tag domain takes.
func want(t reflect.Type, domain string) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := t.Kind(); {
	case reflect.PointerTo(t).Implements(textUnmarshaler), k == reflect.String:
		return "a string"
	case k == reflect.Bool:
		return "true or false"
	case k == reflect.Float32 || k == reflect.Float64 || isNumber(k) && reflect.PointerTo(t).Implements(jsonUnmarshaler):
		switch domain {
		case "count":
			return "a whole number of 0 or more"
		case "signed":
			return "a number"
		}
		return "a number of 0 or more"
	case isNumber(k):
		return "a whole number of 0 or more"
	case k == reflect.Slice || k == reflect.Array:
		return "a list"
	case k == reflect.Map || k == reflect.Struct:
		return "an object"
	}
	return t.String()
}

// got says what the JSON value v is: a string or a number as written,
// or its kind.
func got(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return string(v)
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return strconv.Quote(v)
	case []any:
		return "a list"
	}
	return "an object"
}
