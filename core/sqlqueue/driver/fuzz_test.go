package driver

import (
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
