package engine

import (
	"strings"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Shape is how a form holds its rows, which the settlement statements every form shares
// follow: whether they are fenced by a token, which column they clear, whether they count the
// attempt, and where a hold goes without retry_after.
type Shape struct {
	// Fence is the quoted column that fences every statement (… WHERE id = $n AND fence =
	// $token): a row is settled only by the claim whose token it holds. "" for none.
	Fence string
	// Clear is the quoted column every settlement sets to NULL (a lease, or the mark of a taken
	// row); "" for none.
	Clear string
	// Count is set when the settlement counts the attempt (attempt = attempt + 1), which the
	// claim did not.
	Count bool
	// HoldAt is the quoted column a row held back after a failed settlement gets its hold in,
	// where the table has no retry_after; "" keeps such a hold in memory only.
	HoldAt string
}

// Settlements are the statements that settle one delivery, rendered once per subscription and
// shared by every form: their arguments come in one order, the values they set, then the id,
// then (fenced) the token. The values set are, in this order, where the statement has them: the
// new retry_after (or the dead-letter group), the headers, the last error.
type Settlements struct {
	Done     string // ack and drop: delete, or set processed_at (then now comes first)
	DoneMark bool   // Done sets processed_at
	Retry    string // "" when a retry writes nothing
	// RetryAfter is "" when the table has no retry_after column.
	RetryAfter string
	DLGroup    string // group := dest
	DLNote     string // dead-letter table: record headers and last error on the row before it moves
	DLCopy     string // copy into the dead-letter table
	DLDelete   string // then delete
	DLMove     string // or move in one statement (Mover)
	Hold       string // hold back a row whose settlement failed; "" when only memory can
	Fenced     bool   // every statement takes the token after the id
}

// settleText renders one statement's placeholders in order.
type settleText struct {
	d  driver.Dialect
	sh Shape
	s  *driver.Schema
	n  int
}

func (t *settleText) next() string { t.n++; return t.d.Placeholder(t.n) }

// start begins a statement: its placeholders count from 1.
func (t *settleText) start() *settleText { t.n = 0; return t }

// where is the statement's WHERE: the row, fenced where the form fences.
func (t *settleText) where() string {
	w := " WHERE " + t.s.ID + " = " + t.next()
	if t.sh.Fence != "" {
		w += " AND " + t.sh.Fence + " = " + t.next()
	}
	return w
}

// note sets column to the next argument, where the table has it.
func (t *settleText) note(col string) string {
	if col == "" {
		return ""
	}
	return ", " + col + " = " + t.next()
}

// cleared is what every settlement of a row also sets: the cleared column.
func (t *settleText) cleared() string {
	if t.sh.Clear == "" {
		return ""
	}
	return ", " + t.sh.Clear + " = NULL"
}

// held is what every settlement of a row that does not finish it also sets: the cleared
// column, and the attempt where the settlement counts it (an ack or drop counts nothing).
func (t *settleText) held() string {
	set := t.cleared()
	if t.sh.Count && t.s.Attempt != "" {
		set += ", " + t.s.Attempt + " = " + t.s.Attempt + " + 1"
	}
	return set
}

// RenderSettlements renders the settlement statements of rt's table for a form of shape sh.
func RenderSettlements(rt *Runtime, sh Shape) *Settlements {
	s := rt.S
	t := &settleText{d: rt.D, sh: sh, s: s}
	st := &Settlements{Fenced: sh.Fence != ""}
	if s.ProcessedAt != "" {
		st.DoneMark = true
		st.Done = "UPDATE " + s.QTable + " SET " + s.ProcessedAt + " = " + t.start().next() + t.cleared() + t.where()
	} else {
		st.Done = "DELETE FROM " + s.QTable + t.start().where()
	}
	// Every SET below is ", x = …": the first comma goes.
	if set := t.start().held() + t.note(s.LastError); set != "" {
		st.Retry = "UPDATE " + s.QTable + " SET " + set[2:] + t.where()
	}
	if s.RetryAfter != "" {
		st.RetryAfter = "UPDATE " + s.QTable + " SET " + s.RetryAfter + " = " + t.start().next() + t.held() + t.note(s.LastError) + t.where()
		st.Hold = st.RetryAfter
	} else if sh.HoldAt != "" {
		// Without retry_after the hold goes where the form says (the lease end: once past, the
		// row is taken as a lapsed claim, alone, which costs only its neighbours' company).
		st.Hold = "UPDATE " + s.QTable + " SET " + sh.HoldAt + " = " + t.start().next() + t.note(s.LastError) + t.where()
	}
	renderDeadLetter(rt, t, st)
	return st
}

// renderDeadLetter renders the move to the dead letter: a group, or a table.
func renderDeadLetter(rt *Runtime, t *settleText, st *Settlements) {
	s, d := rt.S, rt.D
	if s.Group != "" {
		ra := ""
		if s.RetryAfter != "" {
			ra = ", " + s.RetryAfter + " = NULL"
		}
		st.DLGroup = "UPDATE " + s.QTable + " SET " + s.Group + " = " + t.start().next() + ra + t.held() + t.note(s.Headers) + t.note(s.LastError) + t.where()
		return
	}
	if rt.DLRef.Name == "" {
		return
	}
	if set := t.start().note(s.Headers) + t.note(s.LastError); set != "" {
		st.DLNote = "UPDATE " + s.QTable + " SET " + set[2:] + t.where()
	}
	to := driver.QuoteRef(d, rt.DLRef)
	cols, exprs := deadColumns(rt, t.sh)
	where := strings.TrimPrefix(t.start().where(), " WHERE ")
	if m, ok := d.(driver.Mover); ok {
		st.DLMove = m.MoveStatement(s.QTable, to, cols, exprs, where)
		return
	}
	st.DLCopy = "INSERT INTO " + to + " (" + strings.Join(cols, ", ") + ") SELECT " + strings.Join(exprs, ", ") + " FROM " + s.QTable + " WHERE " + where
	st.DLDelete = "DELETE FROM " + s.QTable + " WHERE " + where
}

// deadColumns are the columns a row copied to the dead-letter table fills, and the expressions
// over the row that fill them: the row as it is, without its hold and delay, its attempt counted
// where the settlement counts it.
func deadColumns(rt *Runtime, sh Shape) (cols, exprs []string) {
	for _, c := range rt.S.Table.ColumnList() {
		if c.Name == "" {
			continue
		}
		q := rt.D.Quote(c.Name)
		e := q
		switch c.Role {
		case "locked_until", "retry_after", "processed_at":
			e = "NULL"
		case "attempt":
			if sh.Count {
				e = q + " + 1"
			}
		}
		cols, exprs = append(cols, q), append(exprs, e)
	}
	return cols, exprs
}
