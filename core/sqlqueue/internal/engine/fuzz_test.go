package engine

import (
	"encoding/json"
	"maps"
	"testing"
)

// FuzzRowHeaders: a row's headers column never panics a delivery. Empty or null is no
// headers; a JSON object of strings reads as that object (stable through another encoding);
// anything else (not JSON, not an object, values that are not strings) reads as the single
// header HeadersError, so the handler sees the problem instead of losing it.
func FuzzRowHeaders(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `{"a":"b"}`, `{"settle-outbox-id":"7"}`, `[]`, `"x"`, `1`, `{"a":1}`,
		`{"a":{"b":"c"}}`, `{"a":"b"`, `{"a":"\ud800"}`, "\xff", `{"a":"b","a":"c"}`, ` {"a":"b"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := &Delivery{headers: raw}
		h := d.Headers()
		var probe any
		valid := json.Unmarshal(raw, &probe) == nil
		obj, isObject := probe.(map[string]any)
		switch {
		case len(raw) == 0 || (valid && probe == nil):
			if h != nil {
				t.Fatalf("Headers(%q) = %v, want none", raw, h)
			}
		case !valid || !isObject:
			if len(h) != 1 || h[HeadersError] == "" {
				t.Fatalf("Headers(%q) = %v, want only %s", raw, h, HeadersError)
			}
		default:
			for k, v := range obj {
				if _, isString := v.(string); !isString && v != nil {
					if len(h) != 1 || h[HeadersError] == "" {
						t.Fatalf("Headers(%q) = %v: value of %q is a %T, want only %s", raw, h, k, v, HeadersError)
					}
					return
				}
			}
			b, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			again := (&Delivery{headers: b}).Headers()
			if !maps.Equal(again, h) && !(len(again) == 0 && len(h) == 0) {
				t.Fatalf("Headers(%q) = %v, and once more encoded %v", raw, h, again)
			}
		}
	})
}
