package advisory

import (
	"strings"

	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// statements are the advisory form's statements, rendered once when a subscription opens.
type statements struct {
	*engine.Settlements
	candidates string         // ready rows, their keys, and whether they are marked taken
	candB      *driver.Binder // candidates' arguments
	takeStamp  string         // attempt + 1 (and the mark) on a ready row
	takeB      *driver.Binder // takeStamp's arguments (ArgID: the row's id)
	takeRead   string         // read the taken row
	untake     string         // clear the mark and take back the attempt of a row never handed out
}

// shape is how the advisory form holds a row for the settlements: its key on a connection, and
// a mark in locked_until (where the table has it) that every settlement clears.
func shape(s *driver.Schema) engine.Shape { return engine.Shape{Clear: s.LockedUntil} }

// render renders the advisory form's statements for rt with dialect ad's keys.
func render(rt *engine.Runtime, ad driver.AdvisoryDialect) *statements {
	s := rt.S
	st := &statements{Settlements: engine.RenderSettlements(rt, shape(s))}
	key := s.ID
	if rt.Cfg.AdvisoryKey != "" {
		key = "(" + rt.Cfg.AdvisoryKey + ")"
	}
	b := driver.NewBinder(rt.D)
	where := s.Ready(driver.FormAdvisory, b)
	if af, ok := ad.(driver.AdvisoryFilter); ok {
		where += " AND " + af.KeyFree(keyPrefix(rt), ad.KeyText(key))
	}
	taken := "0"
	if s.LockedUntil != "" {
		taken = "CASE WHEN " + s.LockedUntil + " IS NULL THEN 0 ELSE 1 END"
	}
	st.candidates = "SELECT " + s.ID + ", " + ad.KeyText(key) + ", " + taken + " FROM " + s.QTable + " WHERE " + where +
		" ORDER BY " + s.Order() + " LIMIT " + b.Next(driver.ArgLimit)
	st.candB = b
	st.renderTake(rt)
	return st
}

// renderTake renders what takes a row whose key is held: its count (and mark), its read, and
// its give-back.
func (st *statements) renderTake(rt *engine.Runtime) {
	s := rt.S
	ph := rt.D.Placeholder
	tb := driver.NewBinder(rt.D)
	var set []string
	if s.Attempt != "" {
		set = append(set, s.Attempt+" = "+s.Attempt+" + 1")
	}
	if s.LockedUntil != "" {
		set = append(set, s.LockedUntil+" = "+tb.Next(driver.ArgNow)) // the mark of a taken row
	}
	if len(set) == 0 {
		set = append(set, s.ID+" = "+s.ID)
	}
	st.takeStamp = "UPDATE " + s.QTable + " SET " + strings.Join(set, ", ") + " WHERE " + s.ID + " = " + tb.Next(driver.ArgID) + " AND " + s.Ready(driver.FormAdvisory, tb)
	st.takeB = tb
	if s.LockedUntil != "" {
		set := s.LockedUntil + " = NULL"
		if s.Attempt != "" {
			set += ", " + s.Attempt + " = " + s.Attempt + " - 1"
		}
		st.untake = "UPDATE " + s.QTable + " SET " + set + " WHERE " + s.ID + " = " + ph(1)
	}
	att, h, created := "1", "NULL", "NULL"
	if s.Attempt != "" {
		att = s.Attempt
	}
	if s.Headers != "" {
		h = s.Headers
	}
	if s.CreatedAt != "" {
		created = s.CreatedAt
	}
	st.takeRead = "SELECT " + s.Payload + ", " + att + ", " + h + ", " + created + " FROM " + s.QTable + " WHERE " + s.ID + " = " + ph(1)
}

// keyPrefix starts every advisory key of the queue's rows: the table's name (canonical, from
// TableIdentity) and a colon.
func keyPrefix(rt *engine.Runtime) string {
	if rt.Keys == "" {
		return rt.Table + ":"
	}
	return rt.Keys + ":"
}
