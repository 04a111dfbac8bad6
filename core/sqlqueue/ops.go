package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltime"
)

// Ops is the operations view (ops.Queue) of one queue table and its dead letter, on any
// dialect and either table shape:
//
//   - a table with a group column: the queue is a group, its dead letter another group of the
//     same table; Redrive sets the group back (to the settle-origin header's group, or the
//     queue's) with one UPDATE per batch;
//   - a table without one: the dead letter is a table with the same columns; Redrive copies a
//     batch back and deletes it in one transaction, or moves it with one statement where the
//     dialect is a Mover (PostgreSQL). A redriven row gets a new id in the queue table.
//
// Why a dead letter died is read from the headers column (core's dead-letter headers, which the
// engine merges in when it moves a row) or, for a row without them, the last_error column.
// Redrive clears last_error with the attempt count unless asked to keep them.
//
// Every statement is rendered once, by NewOps, with the dialect's quoting and placeholders.
// Rows marked processed (processed_at) are neither counted nor listed.
//
// Stats counts rows by state in one statement: in flight are rows whose lease (locked_until)
// is in the future; delayed, rows whose retry_after is in the future; ready, the rest; the
// oldest ready age is read from created_at. A row held by a row-lock or advisory claim is
// locked in another session, which only the server's own lock tables could show (pg_locks,
// performance_schema, none on SQLite): such rows count as ready. A table without
// locked_until reports in-flight as unmeasured, saying so; without created_at, the oldest
// age.
type Ops struct {
	d       Dialect
	db      DB
	s       *driver.Schema
	group   string
	dead    string   // dead-letter group, or the dead-letter table's name
	deadRef TableRef // dead-letter table (tables without a group column)
	qdead   string   // the table holding dead letters, quoted
	clock   clock.Clock

	name, deadName string // for messages

	stats, deadCount, list string
	statsSlots             []any // nowSlot and groupSlot markers, bound per call
	listArgs               []any // arguments before the cursor and limit
	byIDs, purgeIDs        *sqltext.InList
	// back redrives, by KeepAttempts: group tables set the group (origin, dead group, then
	// ids), dead-letter tables copy back (ids).
	back         [2]*sqltext.InList
	deleteIDs    *sqltext.InList // dead-letter tables: delete the rows copied back, unless moveDirect
	purgeAll     string
	purgeAllArgs []any
	moveDirect   bool // back moves in one statement (Mover): no deleteIDs
}

var _ ops.Queue = (*Ops)(nil)

// OpsOption configures an Ops.
type OpsOption func(*Ops) error

// OpsClock takes the time of Stats from c (default: the wall clock).
func OpsClock(c clock.Clock) OpsOption {
	return func(o *Ops) error {
		if c == nil {
			return errors.New("sqlqueue.OpsClock(nil): no clock")
		}
		o.clock = c
		return nil
	}
}

// NewOps returns the operations view of the queue table t (group names the queue in a table
// with a group column, "" otherwise) whose dead letter is dead: a group of t, or the name of
// a table with t's columns ("" for a queue without a dead letter: Stats still works). It
// checks the tables against the catalogue: a missing table or column gives an error matching
// ops.ErrTargetNotFound.
func NewOps(ctx context.Context, d Dialect, db DB, t Table, group, dead string, opts ...OpsOption) (*Ops, error) {
	q, err := engine.NewQueue("publisher", d, db, t, group)
	if err != nil {
		return nil, err
	}
	o := &Ops{d: d, db: db, s: q.Schema, group: group, dead: dead, clock: clock.Real(), name: q.Name}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("sqlqueue.NewOps: nil option")
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	ref := t.Ref()
	if err := driver.CheckColumns(ctx, d, db, q.Schema.Table, ref); err != nil {
		return nil, targetErr(err)
	}
	switch {
	case dead == "":
	case q.Schema.Group != "":
		if dead == group {
			return nil, fmt.Errorf("sqlqueue: queue %q on table %s cannot be its own dead letter", group, ref)
		}
		o.deadName = fmt.Sprintf("group %q of table %s", dead, ref)
	default:
		dr, err := ParseTableRef(dead)
		if err != nil {
			return nil, fmt.Errorf("sqlqueue: dead letter of table %s (no group column, so the dead letter is a table): %w", ref, err)
		}
		if dr == ref {
			return nil, fmt.Errorf("sqlqueue: table %s cannot be its own dead-letter table", ref)
		}
		if err := driver.CheckColumns(ctx, d, db, q.Schema.Table, dr); err != nil {
			return nil, targetErr(fmt.Errorf("dead-letter table: %w", err))
		}
		o.deadRef, o.deadName = dr, "table "+dr.String()
	}
	o.render()
	return o, nil
}

// targetErr makes a catalogue's "no such table/column" an ops.TargetError.
func targetErr(err error) error {
	var ce *ColumnError
	if errors.As(err, &ce) {
		what := "table " + ce.Table
		if ce.Column != "" {
			what += ", column " + ce.Column + " (" + ce.Role + ")"
		}
		return fmt.Errorf("%w", &ops.TargetError{What: what, Why: ce.Reason})
	}
	return err
}

// DetectTable describes the table ref with the standard column names (StandardTable) of the
// columns it has: optional columns the table lacks are left out. The settle command reads
// tables with it.
func DetectTable(ctx context.Context, d Dialect, q Queryer, ref TableRef) (Table, error) {
	cols, err := d.Columns(ctx, q, ref)
	if err != nil {
		return Table{}, fmt.Errorf("sqlqueue: reading the columns of table %s: %w", ref, err)
	}
	if len(cols) == 0 {
		return Table{}, &ops.TargetError{What: "table " + ref.String(), Why: "no such table"}
	}
	have := map[string]bool{}
	for _, c := range cols {
		have[strings.ToLower(c.Name)] = true
	}
	t := StandardTable(ref.Name)
	t.Schema = ref.Schema
	c := &t.Columns
	c.LastError = "last_error" // not in StandardTable (older tables lack it): named when present
	for _, f := range []*string{&c.LastError, &c.Group, &c.Attempt, &c.RetryAfter, &c.LockedUntil, &c.ProcessedAt, &c.Headers, &c.CreatedAt} {
		if !have[*f] {
			*f = ""
		}
	}
	for _, f := range []string{c.ID, c.Payload} {
		if !have[f] {
			return Table{}, &ops.TargetError{What: "table " + ref.String(), Why: "no " + f + " column: not a queue table"}
		}
	}
	return t, nil
}

// sqlArgs renders placeholders in order and collects their values.
type sqlArgs struct {
	d    Dialect
	args []any
}

func (a *sqlArgs) ph(v any) string {
	a.args = append(a.args, v)
	return a.d.Placeholder(len(a.args))
}

// deadWhere is the condition of a dead letter in the table holding them (group, unprocessed).
func (o *Ops) deadWhere(a *sqlArgs) string {
	var w []string
	if o.s.Group != "" {
		w = append(w, o.s.Group+" = "+a.ph(o.dead))
	}
	if o.s.ProcessedAt != "" {
		w = append(w, o.s.ProcessedAt+" IS NULL")
	}
	if len(w) == 0 {
		return "1 = 1"
	}
	return strings.Join(w, " AND ")
}

func (o *Ops) render() {
	s, d := o.s, o.d
	o.qdead = s.QTable
	if o.deadRef.Name != "" {
		o.qdead = driver.QuoteRef(d, o.deadRef)
	}
	o.stats = o.renderStats()
	if o.dead == "" {
		return
	}
	a := &sqlArgs{d: d}
	o.deadCount = "SELECT COUNT(*) FROM " + o.qdead + " WHERE " + o.deadWhere(a)
	o.listArgs = a.args

	att, h, created, lastErr := "NULL", "NULL", "NULL", "NULL"
	if s.Attempt != "" {
		att = s.Attempt
	}
	if s.LastError != "" {
		lastErr = s.LastError
	}
	if s.Headers != "" {
		h = s.Headers
	}
	if s.CreatedAt != "" {
		created = s.CreatedAt
	}
	cols := s.ID + ", " + s.Payload + ", " + att + ", " + h + ", " + created + ", " + lastErr
	n := len(a.args)
	o.list = "SELECT " + cols + " FROM " + o.qdead + " WHERE " + o.deadWhere(&sqlArgs{d: d}) + " AND " + s.ID + " > " +
		d.Placeholder(n+1) + " ORDER BY " + s.ID + " LIMIT " + d.Placeholder(n+2)
	o.byIDs = sqltext.NewInList(d.Placeholder, "SELECT "+cols+" FROM "+o.qdead+" WHERE "+o.deadWhere(&sqlArgs{d: d})+" AND "+s.ID+" IN (", ") ORDER BY "+s.ID, n+1)
	o.purgeIDs = sqltext.NewInList(d.Placeholder, "DELETE FROM "+o.qdead+" WHERE "+o.deadWhere(&sqlArgs{d: d})+" AND "+s.ID+" IN (", ")", n+1)
	o.purgeAll, o.purgeAllArgs = "DELETE FROM "+o.qdead+" WHERE "+o.deadWhere(&sqlArgs{d: d}), a.args

	for i, keep := range []bool{false, true} {
		if s.Group != "" {
			o.back[i] = o.renderMoveGroup(keep)
		} else {
			o.back[i] = o.renderCopyBack(keep)
		}
	}
	if !o.moveDirect {
		o.deleteIDs = o.purgeIDs // the dead-letter table has no group: its ids come first
	}
}

// renderMoveGroup renders the group redrive: the origin group is the first argument, the
// dead-letter group the second, then the ids.
func (o *Ops) renderMoveGroup(keep bool) *sqltext.InList {
	s, d := o.s, o.d
	set := s.Group + " = " + d.Placeholder(1)
	if s.Attempt != "" && !keep {
		set += ", " + s.Attempt + " = 0"
	}
	if s.LastError != "" && !keep {
		set += ", " + s.LastError + " = NULL"
	}
	for _, c := range []string{s.RetryAfter, s.LockedUntil} {
		if c != "" {
			set += ", " + c + " = NULL"
		}
	}
	where := s.Group + " = " + d.Placeholder(2)
	if s.ProcessedAt != "" {
		where += " AND " + s.ProcessedAt + " IS NULL"
	}
	return sqltext.NewInList(d.Placeholder, "UPDATE "+s.QTable+" SET "+set+" WHERE "+where+" AND "+s.ID+" IN (", ")", 3)
}

// renderCopyBack renders the dead-letter table redrive: copy the rows back into the queue
// table (without their ids: the queue table gives them new ones), then delete them; with a
// Mover, one statement does both. keep marks the KeepAttempts variant.
func (o *Ops) renderCopyBack(keep bool) *sqltext.InList {
	s, d := o.s, o.d
	var cols, exprs []string
	for _, c := range s.Table.ColumnList() {
		if c.Name == "" || c.Role == "id" {
			continue
		}
		q := d.Quote(c.Name)
		e := q
		switch c.Role {
		case "locked_until", "retry_after", "processed_at":
			e = "NULL"
		case "attempt":
			if !keep {
				e = "0"
			}
		case "last_error":
			if !keep {
				e = "NULL"
			}
		}
		cols, exprs = append(cols, q), append(exprs, e)
	}
	where := s.ID + " IN ("
	if s.ProcessedAt != "" {
		where = s.ProcessedAt + " IS NULL AND " + where
	}
	if m, ok := d.(Mover); ok {
		o.moveDirect = true
		// MoveStatement closes nothing after where: split the rendered statement at a marker
		// that stands where the placeholders go.
		const mark = "\x00ids\x00"
		stmt := m.MoveStatement(o.qdead, s.QTable, cols, exprs, where+mark+")")
		if pre, post, ok := strings.Cut(stmt, mark); ok {
			return sqltext.NewInList(d.Placeholder, pre, post, 1)
		}
		o.moveDirect = false // a Mover that does not pass where through: copy, then delete
	}
	return sqltext.NewInList(d.Placeholder, "INSERT INTO "+s.QTable+" ("+strings.Join(cols, ", ")+") SELECT "+strings.Join(exprs, ", ")+
		" FROM "+o.qdead+" WHERE "+where, ") ORDER BY "+s.ID, 1)
}

// renderStats renders the one statement of Stats: in flight, delayed, ready, oldest ready.
func (o *Ops) renderStats() string {
	s := o.s
	// The time placeholders are rendered with a marker value and bound to now per call.
	a := &sqlArgs{d: o.d}
	now := func() string { return a.ph(nowSlot{}) }
	// Each predicate renders fresh placeholders every time it is used: with "?" every
	// occurrence is a parameter of its own.
	inFlight, delayed := func() string { return "1 = 0" }, func() string { return "1 = 0" }
	notInFlight, notDelayed := func() string { return "1 = 1" }, func() string { return "1 = 1" }
	if s.LockedUntil != "" {
		inFlight = func() string { return s.LockedUntil + " > " + now() }
		notInFlight = func() string {
			return "(" + s.LockedUntil + " IS NULL OR " + s.LockedUntil + " <= " + now() + ")"
		}
	}
	if s.RetryAfter != "" {
		delayed = func() string { return s.RetryAfter + " > " + now() }
		notDelayed = func() string {
			return "(" + s.RetryAfter + " IS NULL OR " + s.RetryAfter + " <= " + now() + ")"
		}
	}
	sel := "SELECT COUNT(CASE WHEN " + inFlight() + " THEN 1 END), COUNT(CASE WHEN " + notInFlight() + " AND " + delayed() +
		" THEN 1 END), COUNT(CASE WHEN " + notInFlight() + " AND " + notDelayed() + " THEN 1 END), "
	if s.CreatedAt != "" {
		sel += "MIN(CASE WHEN " + notInFlight() + " AND " + notDelayed() + " THEN " + s.CreatedAt + " END)"
	} else {
		sel += "NULL"
	}
	var w []string
	if s.Group != "" {
		w = append(w, s.Group+" = "+a.ph(groupSlot{}))
	}
	if s.ProcessedAt != "" {
		w = append(w, s.ProcessedAt+" IS NULL")
	}
	where := ""
	if len(w) > 0 {
		where = " WHERE " + strings.Join(w, " AND ")
	}
	o.statsSlots = a.args
	return sel + " FROM " + s.QTable + where
}

type nowSlot struct{}
type groupSlot struct{}

// Stats measures the queue by state in one statement, and counts its dead letters in another.
func (o *Ops) Stats(ctx context.Context) (ops.Stats, error) {
	now := o.clock.Now().UTC().Truncate(time.Microsecond)
	st := ops.Stats{Queue: o.name, DeadLetter: o.deadName, At: now}
	args := make([]any, len(o.statsSlots))
	for i, s := range o.statsSlots {
		switch s.(type) {
		case nowSlot:
			args[i] = o.d.Time(now)
		case groupSlot:
			args[i] = o.group
		}
	}
	rows, err := o.db.Query(ctx, o.stats, args...)
	if err != nil {
		return st, fmt.Errorf("sqlqueue: stats of queue %q: %w", o.name, err)
	}
	var oldest any
	err = scanOne(rows, &st.InFlight, &st.Delayed, &st.Ready, &oldest)
	if err != nil {
		return st, fmt.Errorf("sqlqueue: stats of queue %q: %w", o.name, err)
	}
	if o.s.LockedUntil == "" {
		st.Unmeasured = append(st.Unmeasured, ops.Unmeasured{Figure: ops.FigureInFlight,
			Why: "the table has no locked_until column: rows held by a row-lock or advisory claim are locked in another session, which only the server's lock tables show, so they count as ready"})
	}
	switch {
	case o.s.CreatedAt == "":
		st.Unmeasured = append(st.Unmeasured, ops.Unmeasured{Figure: ops.FigureOldestReady, Why: "the table has no created_at column"})
	case oldest != nil:
		t, err := sqltime.Parse(oldest)
		if err != nil {
			st.Unmeasured = append(st.Unmeasured, ops.Unmeasured{Figure: ops.FigureOldestReady, Why: "created_at: " + err.Error()})
		} else {
			st.OldestReady = max(now.Sub(t), 0)
		}
	}
	if o.dead == "" {
		st.Unmeasured = append(st.Unmeasured, ops.Unmeasured{Figure: ops.FigureDead, Why: "no dead letter named"})
		return st, nil
	}
	rows, err = o.db.Query(ctx, o.deadCount, o.listArgs...)
	if err == nil {
		err = scanOne(rows, &st.Dead)
	}
	if err != nil {
		return st, fmt.Errorf("sqlqueue: counting the dead letters in %s: %w", o.deadName, err)
	}
	return st, nil
}

// scanOne reads the one row of a statement.
func scanOne(rows Rows, dest ...any) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("no row")
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && strconv.FormatInt(n, 10) == s
}
