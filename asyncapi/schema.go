package asyncapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
)

// TypeError is returned for a payload type that JSON Schema cannot describe: a channel, a
// function, a complex number or an unsafe pointer, reached from the payload through the fields
// encoding/json would encode.
type TypeError struct {
	// Operation names the subscription (or publisher) whose payload it is.
	Operation string
	// Type is the payload type, Path where in it the problem is ("Refund.Done"), Bad the type
	// found there.
	Type reflect.Type
	Path string
	Bad  reflect.Type
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("asyncapi: %s: payload type %v cannot be described as JSON Schema: %s is a %v",
		e.Operation, e.Type, e.Path, e.Bad)
}

var customSchema = reflect.TypeFor[interface{ JSONSchema() *jsonschema.Schema }]()

// checkType walks t the way the reflector will (exported fields not tagged "-", elements of
// pointers, slices, arrays and maps) and returns a TypeError at the first type it cannot
// describe. It records the named struct types it meets in names, which keys the document's
// schemas by type name: two types of one name are refused rather than merged.
func checkType(op string, t reflect.Type, names map[string]reflect.Type) error {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string) error
	walk = func(t reflect.Type, path string) error {
		if seen[t] {
			return nil // a cycle, or a type met before: the reflector refers to its definition
		}
		seen[t] = true
		if t.Implements(customSchema) || reflect.PointerTo(t).Implements(customSchema) {
			return nil
		}
		switch t.Kind() {
		case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer, reflect.Uintptr, reflect.Invalid:
			return &TypeError{Operation: op, Path: path, Bad: t}
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return walk(t.Elem(), path+"[]")
		case reflect.Map:
			if err := walk(t.Key(), path+"{key}"); err != nil {
				return err
			}
			return walk(t.Elem(), path+"{}")
		case reflect.Struct:
			if t.Name() != "" && t.PkgPath() != "" {
				if other, ok := names[t.Name()]; ok && other != t {
					return fmt.Errorf("asyncapi: %s: payload types %v and %v are both named %s; the document keys its schemas by type name: rename one",
						op, other, t, t.Name())
				}
				names[t.Name()] = t
			}
			for i := range t.NumField() {
				f := t.Field(i)
				if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("json") == "-" {
					continue
				}
				if err := walk(f.Type, path+"."+f.Name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(t, typeLabel(t))
	if te, ok := err.(*TypeError); ok {
		te.Type = t
	}
	return err
}

func typeLabel(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}

// schemas reflects payload types into JSON Schemas kept in the document's components: one per
// named type, the payload's own referring to the others with #/components/schemas/….
type schemas struct {
	r    *jsonschema.Reflector
	defs map[string]json.RawMessage
}

func newSchemas(r *jsonschema.Reflector) *schemas {
	return &schemas{r: r, defs: map[string]json.RawMessage{}}
}

const (
	defsPrefix       = `"$ref":"#/$defs/`
	componentsPrefix = `"$ref":"#/components/schemas/`
)

// payload returns the schema of a payload of type t: a reference to its definition in the
// components, or, for a type without a name, the schema itself.
func (s *schemas) payload(op string, t reflect.Type) (schema json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil { // checkType should have refused it first
			err = fmt.Errorf("asyncapi: %s: payload type %v: the reflector failed: %v", op, t, r)
		}
	}()
	root := s.r.ReflectFromType(t)
	for name, def := range root.Definitions {
		raw, err := refer(def)
		if err != nil {
			return nil, fmt.Errorf("asyncapi: %s: payload type %v: schema %s: %w", op, t, name, err)
		}
		s.defs[name] = raw
	}
	root.Definitions, root.Version, root.ID = nil, "", ""
	return refer(root)
}

// refer marshals a schema with its references into $defs pointed at the document's components.
func refer(s *jsonschema.Schema) (json.RawMessage, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(raw, []byte(defsPrefix), []byte(componentsPrefix)), nil
}

// componentRef returns the component name a schema that is only a reference names.
func componentRef(raw json.RawMessage) (string, bool) {
	var r struct {
		Ref string `json:"$ref"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Ref == "" {
		return "", false
	}
	name, ok := strings.CutPrefix(r.Ref, "#/components/schemas/")
	if !ok || string(raw) != `{"$ref":"#/components/schemas/`+name+`"}` {
		return "", false
	}
	return name, true
}
