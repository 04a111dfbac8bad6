package sqlqueue

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

// FuzzIdentifiers: an identifier ValidIdent accepts is safe to splice into SQL once quoted:
// it holds only [A-Za-z0-9_$] (no quote of any dialect, no space, no comment or statement
// break) and starts with a letter or _ (its length is the dialect's to limit). A table
// reference ParseTableRef
// accepts is made of such identifiers and spells back to the very text it was read from.
func FuzzIdentifiers(f *testing.F) {
	for _, s := range []string{
		"jobs", "s.jobs", ".jobs", "jobs.", "a.b.c", "", ".", "_a$1", "1a", "$a", "a b", `a"b`, "a`b",
		"a]b", "a;b", "a--b", "a/*b", "é", strings.Repeat("a", 63), strings.Repeat("a", 64),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidIdent(s) {
			if len(s) == 0 {
				t.Fatalf("ValidIdent(%q) with %d bytes", s, len(s))
			}
			for i := 0; i < len(s); i++ {
				c := s[i]
				letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
				if !letter && (i == 0 || !((c >= '0' && c <= '9') || c == '$')) {
					t.Fatalf("ValidIdent(%q) accepts byte %q at %d", s, c, i)
				}
			}
			if err := (Table{Name: s}).Validate(); err != nil {
				t.Fatalf("a valid identifier is refused as a table name: %v", err)
			}
		}
		ref, err := ParseTableRef(s)
		if err != nil {
			return
		}
		if ref.String() != s {
			t.Fatalf("ParseTableRef(%q) = %+v, which spells %q", s, ref, ref.String())
		}
		if !ValidIdent(ref.Name) || (ref.Schema != "" && !ValidIdent(ref.Schema)) {
			t.Fatalf("ParseTableRef(%q) = %+v: a part is not a valid identifier", s, ref)
		}
		if strings.Count(s, ".") != map[bool]int{true: 1, false: 0}[ref.Schema != ""] {
			t.Fatalf("ParseTableRef(%q) = %+v", s, ref)
		}
		if again, err := ParseTableRef(ref.String()); err != nil || again != ref {
			t.Fatalf("ParseTableRef(%q) round trip: %+v, %v", s, again, err)
		}
	})
}

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
		d := &delivery{headers: raw}
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
			again := (&delivery{headers: b}).Headers()
			if !maps.Equal(again, h) && !(len(again) == 0 && len(h) == 0) {
				t.Fatalf("Headers(%q) = %v, and once more encoded %v", raw, h, again)
			}
		}
	})
}
