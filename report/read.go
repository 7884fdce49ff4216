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

// Read checks the document b against the types of an experiment's
// params (P) and results (R) and decodes it. Beyond what json.Unmarshal
// checks, every field that Document[P, R] always writes (no omitempty)
// must be there, each value must have its field's JSON type (null only for
// a list, an object of a map, or an omitempty pointer), and every number is
// a count, a size, a time, a rate or a ratio: none is negative, and one of
// an integer field, or of a float field tagged `report:"count"`, is a whole
// number. Keys it does not know are ignored: a field that a newer mmlab
// adds within the same schema_version is optional, and a change an older
// reader would misread raises the version, which Head refuses.
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
	// What the walk let through decodes; json.Unmarshal also matches keys
	// regardless of case, which the walk does not.
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

// checkFields checks the object obj against the struct type t, whose
// embedded structs' fields are in obj itself, as encoding/json writes
// them; those of an embedded pointer are all there or none (a nil one).
func checkFields(obj map[string]any, t reflect.Type, path string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous || path == "" && name == "schema_version" { // head checked it: none is version 1
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
				if !hasField(obj, ft) {
					continue
				}
			}
			if ft.Kind() == reflect.Struct {
				if err := checkFields(obj, ft, path); err != nil {
					return err
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		at := join(path, name)
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		v, ok := obj[name]
		if !ok && optional {
			continue
		}
		if !ok || v == nil && f.Type.Kind() == reflect.Pointer && !optional {
			return fmt.Errorf("%s: %w: want %s", at, ErrMissing, want(f.Type))
		}
		if err := check(v, f.Type, at, f.Tag.Get("report") == "count"); err != nil {
			return err
		}
	}
	return nil
}

// hasField says whether obj holds a field of the struct type t.
func hasField(obj map[string]any, t reflect.Type) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if _, ok := obj[name]; ok {
			return true
		}
	}
	return false
}

// check checks the JSON value v against the Go type t; count is set for
// a float that counts.
func check(v any, t reflect.Type, path string, count bool) error {
	if v == nil {
		switch t.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
			return nil
		}
		return fmt.Errorf("%s: %w: got null, want %s", path, ErrType, want(t))
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrongType := func() error { return fmt.Errorf("%s: %w: got %s, want %s", path, ErrType, got(v), want(t)) }
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
	n, isNum := v.(json.Number)
	outOfDomain := func() error { return fmt.Errorf("%s: %w: got %s, want %s", path, ErrDomain, n, want(t)) }
	switch k := t.Kind(); {
	case k == reflect.Interface:
		return nil
	case isNumber(k) && pt.Implements(jsonUnmarshaler): // experiment.Duration: milliseconds, maybe a fraction
		x, err := strconv.ParseFloat(string(n), 64)
		if !isNum {
			return wrongType()
		}
		if err != nil || x < 0 {
			return fmt.Errorf("%s: %w: got %s, want a number of 0 or more", path, ErrDomain, n)
		}
	case k == reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrongType()
		}
	case k == reflect.String:
		if _, ok := v.(string); !ok {
			return wrongType()
		}
	case k >= reflect.Int && k <= reflect.Int64:
		x, err := strconv.ParseInt(string(n), 10, 64)
		if !isNum {
			return wrongType()
		}
		if err != nil || x < 0 || reflect.New(t).Elem().OverflowInt(x) {
			return outOfDomain()
		}
	case k >= reflect.Uint && k <= reflect.Uint64:
		x, err := strconv.ParseUint(string(n), 10, 64)
		if !isNum {
			return wrongType()
		}
		if err != nil || reflect.New(t).Elem().OverflowUint(x) {
			return outOfDomain()
		}
	case k == reflect.Float32 || k == reflect.Float64:
		x, err := strconv.ParseFloat(string(n), 64)
		if !isNum {
			return wrongType()
		}
		if err != nil || x < 0 || count && x != math.Trunc(x) || reflect.New(t).Elem().OverflowFloat(x) {
			if count {
				return fmt.Errorf("%s: %w: got %s, want a whole number of 0 or more", path, ErrDomain, n)
			}
			return outOfDomain()
		}
	case k == reflect.Slice || k == reflect.Array:
		list, ok := v.([]any)
		if !ok || k == reflect.Array && len(list) != t.Len() {
			return wrongType()
		}
		for i, e := range list {
			if err := check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), count); err != nil {
				return err
			}
		}
	case k == reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return wrongType()
		}
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if err := check(obj[key], t.Elem(), join(path, key), count); err != nil {
				return err
			}
		}
	case k == reflect.Struct:
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

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// want says in words what JSON the Go type t takes.
func want(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := t.Kind(); {
	case reflect.PointerTo(t).Implements(textUnmarshaler), k == reflect.String:
		return "a string"
	case k == reflect.Bool:
		return "true or false"
	case k == reflect.Float32 || k == reflect.Float64 || isNumber(k) && reflect.PointerTo(t).Implements(jsonUnmarshaler):
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
