package sqlqueue

import "testing"

func TestParseTableRef(t *testing.T) {
	t.Parallel()
	ok := []struct {
		in   string
		want TableRef
	}{
		{"jobs", TableRef{Name: "jobs"}},
		{"s.jobs", TableRef{Schema: "s", Name: "jobs"}},
		{"_s$1.j_2", TableRef{Schema: "_s$1", Name: "j_2"}},
	}
	for _, c := range ok {
		if got, err := ParseTableRef(c.in); err != nil || got != c.want {
			t.Errorf("ParseTableRef(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	// ".jobs" was read as the unqualified "jobs"; an empty schema part is as wrong as an
	// empty name part.
	for _, in := range []string{"", ".", ".jobs", "jobs.", "a.b.c", "a..b", " jobs", "1jobs", "s.1jobs", "jobs;", `"jobs"`} {
		if got, err := ParseTableRef(in); err == nil {
			t.Errorf("ParseTableRef(%q) = %+v, want an error", in, got)
		}
	}
}
