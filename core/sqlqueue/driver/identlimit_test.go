package driver

import (
	"strings"
	"testing"
)

// limited is pgLike with PostgreSQL's identifier limit.
type limited struct{ pgLike }

func (limited) MaxIdentifier() int { return 63 }

// TestIdentifierLimitIsTheDialects: NewSchema refuses a name longer than the dialect's limit,
// whichever name it is, saying the limit and the dialect; a dialect without a limit takes any
// length.
func TestIdentifierLimitIsTheDialects(t *testing.T) {
	long, fits := strings.Repeat("a", 64), strings.Repeat("a", 63)
	for _, tb := range []Table{
		{Name: long},
		{Schema: long, Name: "jobs"},
		{Name: "jobs", Columns: Columns{Attempt: long}},
	} {
		_, err := NewSchema(limited{}, tb)
		if err == nil || !strings.Contains(err.Error(), "at most 63") || !strings.Contains(err.Error(), "pglike") || !strings.Contains(err.Error(), long) {
			t.Errorf("NewSchema(%+v) with a 63-character limit: %v", tb, err)
		}
		if _, err := NewSchema(pgLike{}, tb); err != nil {
			t.Errorf("NewSchema(%+v) without a limit: %v", tb, err)
		}
	}
	if _, err := NewSchema(limited{}, Table{Schema: fits, Name: fits, Columns: Columns{Attempt: fits}}); err != nil {
		t.Errorf("63-character names under a 63-character limit: %v", err)
	}
	if _, err := NewSchema(pgLike{}, Table{Name: strings.Repeat("t", 300)}); err != nil {
		t.Errorf("a 300-character name without a limit: %v", err)
	}
}
