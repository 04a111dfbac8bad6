package sqlqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltime"
)

// opsBatch is how many rows one listing query reads and one redrive or purge statement moves.
const opsBatch = 500

// deadRow is one dead letter as read.
type deadRow struct {
	id int64
	d  ops.DeadLetter
}

// scanDead reads rows of the listing columns: id, payload, attempt, headers, created_at,
// last_error. The reason is the settle-error header, or last_error for a row without one.
func (o *Ops) scanDead(rows Rows, dst []deadRow) ([]deadRow, error) {
	defer rows.Close()
	for rows.Next() {
		var (
			r       deadRow
			att     any
			headers []byte
			created any
			lastErr any
		)
		if err := rows.Scan(&r.id, &r.d.Payload, &att, &headers, &created, &lastErr); err != nil {
			return dst, err
		}
		r.d.ID = strconv.FormatInt(r.id, 10)
		switch n := att.(type) {
		case int64:
			r.d.Count = int(n)
		case int32:
			r.d.Count = int(n)
		case []byte: // MySQL's text protocol
			c, _ := strconv.Atoi(string(n))
			r.d.Count = c
		}
		if created != nil {
			r.d.Created, _ = sqltime.Parse(created)
		}
		switch e := lastErr.(type) {
		case string:
			r.d.Reason = e
		case []byte:
			r.d.Reason = string(e)
		}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &r.d.Headers); err != nil {
				return dst, fmt.Errorf("row %d of %s: headers column is not a JSON object of strings: %w", r.id, o.deadName, err)
			}
		}
		// A malformed dead-letter header leaves its field as the row has it.
		_ = r.d.ReadHeaders()
		dst = append(dst, r)
	}
	if err := rows.Err(); err != nil {
		return dst, err
	}
	return dst, rows.Close()
}

// scan reads the dead letters after id from, at most limit of them, oldest first.
func (o *Ops) scan(ctx context.Context, q Queryer, from int64, limit int) ([]deadRow, error) {
	args := append(append(make([]any, 0, len(o.listArgs)+2), o.listArgs...), from, int64(limit))
	rows, err := q.Query(ctx, o.list, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue: listing %s: %w", o.deadName, err)
	}
	got, err := o.scanDead(rows, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue: listing %s: %w", o.deadName, err)
	}
	return got, nil
}

// ListDead returns a page of the dead letters f matches, by id; the cursor is the last id.
func (o *Ops) ListDead(ctx context.Context, f ops.Filter, p ops.Page) (ops.DeadPage, error) {
	if o.dead == "" {
		return ops.DeadPage{}, fmt.Errorf("%w: queue %q", ops.ErrNoDeadLetter, o.name)
	}
	var from int64
	if p.After != "" {
		n, ok := parseID(p.After)
		if !ok {
			return ops.DeadPage{}, fmt.Errorf("sqlqueue: listing cursor %q is not a row id", p.After)
		}
		from = n
	}
	limit := p.LimitOf()
	var page ops.DeadPage
	for {
		batch, err := o.scan(ctx, o.db, from, max(limit+1, min(opsBatch, 4*limit)))
		if err != nil {
			return ops.DeadPage{}, err
		}
		for _, r := range batch {
			if !f.Match(r.d) {
				continue
			}
			if len(page.Items) == limit { // one more matches: there is a next page
				page.Next = page.Items[limit-1].ID
				return page, nil
			}
			page.Items = append(page.Items, r.d)
		}
		if len(batch) == 0 || len(batch) < max(limit+1, min(opsBatch, 4*limit)) {
			return page, nil
		}
		from = batch[len(batch)-1].id
	}
}

// GetDead returns the dead letter with row id id.
func (o *Ops) GetDead(ctx context.Context, id string) (ops.DeadLetter, error) {
	if o.dead == "" {
		return ops.DeadLetter{}, fmt.Errorf("%w: queue %q", ops.ErrNoDeadLetter, o.name)
	}
	rows, err := o.lookup(ctx, []string{id})
	if err != nil {
		return ops.DeadLetter{}, err
	}
	return rows[0].d, nil
}

// lookup reads the dead letters with these ids, in id order; any id not among them gives a
// *ops.NotFoundError.
func (o *Ops) lookup(ctx context.Context, ids []string) ([]deadRow, error) {
	var out []deadRow
	var missing []string
	want := make([]int64, 0, len(ids))
	for _, s := range ids {
		if n, ok := parseID(s); ok {
			want = append(want, n)
		} else {
			missing = append(missing, s)
		}
	}
	for start := 0; start < len(want); start += opsBatch {
		part := want[start:min(start+opsBatch, len(want))]
		args := append([]any(nil), o.listArgs...)
		for _, n := range part {
			args = append(args, n)
		}
		rows, err := o.db.Query(ctx, o.byIDs.SQL(len(part)), args...)
		if err != nil {
			return nil, fmt.Errorf("sqlqueue: reading %s: %w", o.deadName, err)
		}
		if out, err = o.scanDead(rows, out); err != nil {
			return nil, fmt.Errorf("sqlqueue: reading %s: %w", o.deadName, err)
		}
	}
	found := make(map[int64]bool, len(out))
	for _, r := range out {
		found[r.id] = true
	}
	for _, n := range want {
		if !found[n] {
			missing = append(missing, strconv.FormatInt(n, 10))
		}
	}
	if len(missing) > 0 {
		return nil, &ops.NotFoundError{DeadLetter: o.deadName, IDs: missing}
	}
	return out, nil
}

// each calls fn with batches of the selected dead letters: the ids' rows (all found, or a
// *ops.NotFoundError before any call), or every dead letter the filter or All matches, read
// batch by batch in id order.
func (o *Ops) each(ctx context.Context, s ops.Selection, fn func([]deadRow) error) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if o.dead == "" {
		return fmt.Errorf("%w: queue %q", ops.ErrNoDeadLetter, o.name)
	}
	if len(s.IDs) > 0 {
		rows, err := o.lookup(ctx, s.IDs)
		if err != nil {
			return err
		}
		for start := 0; start < len(rows); start += opsBatch {
			if err := fn(rows[start:min(start+opsBatch, len(rows))]); err != nil {
				return err
			}
		}
		return nil
	}
	var from int64
	for {
		batch, err := o.scan(ctx, o.db, from, opsBatch)
		if err != nil || len(batch) == 0 {
			return err
		}
		from = batch[len(batch)-1].id
		sel := batch[:0:0]
		for _, r := range batch {
			if s.Match(r.d) {
				sel = append(sel, r)
			}
		}
		if len(sel) > 0 {
			if err := fn(sel); err != nil {
				return err
			}
		}
		if len(batch) < opsBatch {
			return nil
		}
	}
}

// Redrive moves the selected dead letters back: one UPDATE per batch and origin group in a
// table with a group column; one copy-and-delete transaction (or one move statement, on a
// Mover) per batch with a dead-letter table, whose rows must come from this queue's table.
func (o *Ops) Redrive(ctx context.Context, s ops.Selection, opt ops.RedriveOptions) (int, error) {
	stmt := o.back[0]
	if opt.KeepAttempts {
		stmt = o.back[1]
	}
	moved := 0
	err := o.each(ctx, s, func(rows []deadRow) error {
		var n int
		var err error
		if o.s.Group != "" {
			n, err = o.redriveGroups(ctx, stmt, rows)
		} else {
			n, err = o.redriveTable(ctx, stmt, rows)
		}
		moved += n
		if n > 0 && err == nil && opt.Moved != nil {
			ids := make([]string, len(rows))
			for i, r := range rows {
				ids[i] = r.d.ID
			}
			opt.Moved(ids)
		}
		return err
	})
	return moved, err
}

// redriveGroups sets each row's group back to its origin, one UPDATE per origin.
func (o *Ops) redriveGroups(ctx context.Context, stmt *sqltext.InList, rows []deadRow) (int, error) {
	byOrigin := map[string][]any{}
	var order []string
	for _, r := range rows {
		to := r.d.Origin
		if to == "" || to == o.dead {
			to = o.group
		}
		if byOrigin[to] == nil {
			order = append(order, to)
		}
		byOrigin[to] = append(byOrigin[to], r.id)
	}
	moved := 0
	for _, to := range order {
		ids := byOrigin[to]
		res, err := o.db.Exec(ctx, stmt.SQL(len(ids)), append([]any{to, o.dead}, ids...)...)
		if err != nil {
			return moved, fmt.Errorf("sqlqueue: redriving %d dead letters of %s to group %q: %w", len(ids), o.deadName, to, err)
		}
		moved += int(res.RowsAffected)
	}
	return moved, nil
}

// redriveTable copies rows back into the queue table and deletes them from the dead-letter
// table in one transaction (or one statement).
func (o *Ops) redriveTable(ctx context.Context, stmt *sqltext.InList, rows []deadRow) (int, error) {
	ids := make([]any, len(rows))
	for i, r := range rows {
		if r.d.Origin != "" && r.d.Origin != o.name {
			return 0, fmt.Errorf("sqlqueue: dead letter %d of %s came from %q, not table %s: redrive it with a target on its own table",
				r.id, o.deadName, r.d.Origin, o.name)
		}
		ids[i] = r.id
	}
	if o.moveDirect {
		res, err := o.db.Exec(ctx, stmt.SQL(len(ids)), ids...)
		if err != nil {
			return 0, fmt.Errorf("sqlqueue: moving %d dead letters of %s back to table %s: %w", len(ids), o.deadName, o.name, err)
		}
		return int(res.RowsAffected), nil
	}
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("sqlqueue: redriving from %s: %w", o.deadName, err)
	}
	defer tx.Rollback(ctx)
	copied, err := tx.Exec(ctx, stmt.SQL(len(ids)), ids...)
	if err != nil {
		return 0, fmt.Errorf("sqlqueue: copying %d dead letters of %s back to table %s: %w", len(ids), o.deadName, o.name, err)
	}
	deleted, err := tx.Exec(ctx, o.deleteIDs.SQL(len(ids)), ids...)
	if err != nil {
		return 0, fmt.Errorf("sqlqueue: deleting %d redriven dead letters from %s: %w", len(ids), o.deadName, err)
	}
	if copied.RowsAffected != deleted.RowsAffected {
		// Another session changed the rows between the two statements: roll back, move nothing.
		return 0, fmt.Errorf("sqlqueue: redriving from %s: copied %d rows but deleted %d (changed concurrently); rolled back",
			o.deadName, copied.RowsAffected, deleted.RowsAffected)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("sqlqueue: redriving from %s: commit: %w", o.deadName, err)
	}
	return int(copied.RowsAffected), nil
}

// Purge deletes the selected dead letters: all of them with one DELETE, otherwise one DELETE
// per batch.
func (o *Ops) Purge(ctx context.Context, s ops.Selection) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if o.dead == "" {
		return 0, fmt.Errorf("%w: queue %q", ops.ErrNoDeadLetter, o.name)
	}
	if s.All {
		res, err := o.db.Exec(ctx, o.purgeAll, o.purgeAllArgs...)
		if err != nil {
			return 0, fmt.Errorf("sqlqueue: purging %s: %w", o.deadName, err)
		}
		return int(res.RowsAffected), nil
	}
	deleted := 0
	err := o.each(ctx, s, func(rows []deadRow) error {
		args := append([]any(nil), o.listArgs...)
		for _, r := range rows {
			args = append(args, r.id)
		}
		res, err := o.db.Exec(ctx, o.purgeIDs.SQL(len(rows)), args...)
		if err != nil {
			return fmt.Errorf("sqlqueue: purging %d dead letters of %s: %w", len(rows), o.deadName, err)
		}
		deleted += int(res.RowsAffected)
		return nil
	})
	return deleted, err
}
