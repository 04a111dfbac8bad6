package sqlqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
)

// delivery is one claimed row. Deliveries of one claim live in one slab (its flags are kept
// together, so that they pad the struct once).
type delivery struct {
	rt      *runtime
	id      int64
	idStr   string // id in decimal, set when the delivery is built (the extender reads it concurrently)
	attempt int
	payload []byte
	headers []byte
	// createdAt is the row's created_at (zero without one): core.Enqueued.
	createdAt time.Time

	mu       sync.Mutex // lease: guards token against the extender
	token    time.Time  // lease: locked_until as stamped
	handedAt time.Time  // lease with a handler Timeout: when it was handed out

	lost      bool // lease: an extension found the row taken
	finishing bool // lease: Finish was called; the extender leaves it alone
	overran   bool // lease: its handler ran past Timeout and grace; no longer extended
	settled   bool
	suspect   bool // lease: taken after its previous claim lapsed without a settlement
	uncharged bool // lease: rescued, its attempt not yet counted (Charge counts it as its handler starts)
	counted   bool // row lock: its claim counted its attempt

	lb  *leaseBatch // lease
	rb  *rlBatch    // row lock
	ac  *advConn    // advisory
	key string      // advisory

	hctx *handlerTx // transactional mode: set by HandlerContext
}

// Suspect reports whether the row's previous claim lapsed without a settlement: its process
// may have died in its handler. Core runs it with no other handler of the subscription.
func (d *delivery) Suspect() bool { return d.suspect }

// ID is the row id in decimal.
func (d *delivery) ID() string { return d.idStr }

func (d *delivery) Attempt() int { return d.attempt }
func (d *delivery) Body() []byte { return d.payload }

// Headers decodes the headers column (a JSON object of strings). A column that does not hold
// one (written by hand, say) reads as the single header HeadersError with the decoding error,
// so the handler can see it instead of losing it.
func (d *delivery) Headers() map[string]string {
	if len(d.headers) == 0 || string(d.headers) == "null" {
		return nil
	}
	var h map[string]string
	if err := json.Unmarshal(d.headers, &h); err != nil {
		return map[string]string{HeadersError: err.Error()}
	}
	return h
}

// HeadersError is the header a delivery reports when its headers column is not a JSON object
// of strings.
const HeadersError = "settle-headers-error"

// RowID returns the row id of a queue-table delivery (m.Delivery()), and false for a delivery
// of another backend.
func RowID(d core.Delivery) (int64, bool) {
	if x, ok := d.(*delivery); ok {
		return x.id, true
	}
	return 0, false
}

// HandlerContext puts the delivery into the handler's context in transactional mode, for Tx.
func (d *delivery) HandlerContext(ctx context.Context) context.Context {
	if !d.rt.cfg.transactional {
		return ctx
	}
	d.hctx = &handlerTx{d: d}
	return context.WithValue(ctx, txKey{}, d.hctx)
}

type txKey struct{}

// ErrNotTransactional is returned by Tx for a handler not mounted with Transactional().
var ErrNotTransactional = errors.New("sqlqueue: no delivery transaction in this context (mount the handler with sqlqueue.Transactional())")

// handlerTx is the handler's view of its delivery's transaction: it begins on first use and
// cannot be committed or rolled back by the handler (the outcome decides).
type handlerTx struct {
	d      *delivery
	tx     Transaction // begun lazily; in the row-lock form, the claim transaction
	begun  bool
	sp     bool // row lock: a savepoint is open
	err    error
	closed bool
}

func (h *handlerTx) Exec(ctx context.Context, sql string, args ...any) (Result, error) {
	if h.closed {
		return Result{}, errSettled
	}
	return h.tx.Exec(ctx, sql, args...)
}

func (h *handlerTx) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	if h.closed {
		return nil, errSettled
	}
	return h.tx.Query(ctx, sql, args...)
}

var (
	errSettled  = errors.New("sqlqueue: the delivery's transaction is finished")
	errOutcomes = errors.New("sqlqueue: a delivery's transaction is committed or rolled back by the handler's outcome, not by the handler")
)

func (h *handlerTx) Commit(context.Context) error   { return errOutcomes }
func (h *handlerTx) Rollback(context.Context) error { return errOutcomes }
func (h *handlerTx) Unwrap() any                    { return h.tx.Unwrap() }

// Tx returns the transaction of the delivery the handler is working on, in a subscription
// mounted with Transactional(). Ack commits what the handler wrote through it together with
// the settlement; every other outcome rolls it back. Commit and Rollback are the outcome's:
// calling them returns an error.
func Tx(ctx context.Context) (Transaction, error) {
	h, ok := ctx.Value(txKey{}).(*handlerTx)
	if !ok {
		return nil, ErrNotTransactional
	}
	if h.begun {
		return h, h.err
	}
	h.begun = true
	h.err = h.d.beginHandlerTx(ctx, h)
	if h.err != nil {
		h.err = fmt.Errorf("sqlqueue: beginning the delivery's transaction: %w", h.err)
	}
	return h, h.err
}

// TxAs returns the driver's own transaction (Transaction.Unwrap) of the handler's delivery as a
// T: dialects offer it typed (sqlite.Tx returns *sql.Tx, postgres.Tx a pgx.Tx).
func TxAs[T any](ctx context.Context) (T, error) {
	var zero T
	tx, err := Tx(ctx)
	if err != nil {
		return zero, err
	}
	t, ok := tx.Unwrap().(T)
	if !ok {
		return zero, fmt.Errorf("sqlqueue: the delivery's transaction is a %T, not a %T", tx.Unwrap(), zero)
	}
	return t, nil
}

// beginHandlerTx opens the handler's transaction per form.
func (d *delivery) beginHandlerTx(ctx context.Context, h *handlerTx) error {
	ctx = context.WithoutCancel(ctx) // the outcome ends the transaction, not the handler's context
	switch d.rt.q.form {
	case FormLease:
		tx, err := d.rt.db.Begin(ctx)
		h.tx = tx
		return err
	case FormAdvisory:
		tx, err := d.ac.c.Begin(ctx)
		h.tx = tx
		return err
	default:
		b := d.rb
		b.mu.Lock()
		defer b.mu.Unlock()
		h.tx = b.tx
		if _, err := b.tx.Exec(ctx, "SAVEPOINT settle_delivery"); err != nil {
			return err
		}
		h.sp = true
		return nil
	}
}

// openTx returns the handler's begun transaction, nil when the handler never used it.
func (d *delivery) openTx() *handlerTx {
	if d.hctx == nil || !d.hctx.begun || d.hctx.err != nil {
		return nil
	}
	return d.hctx
}

// newDeliveries makes the deliveries of one claim in one slab, their ids in decimal in one
// string (one allocation per claim rather than one per row).
func newDeliveries(rt *runtime, rows []Claimed) []delivery {
	ds := make([]delivery, len(rows))
	if len(rows) == 0 {
		return ds
	}
	var num [20]byte
	var endBuf [DefaultMaxBatch]int32 // an automatic claim's ends stay on the stack
	ends := endBuf[:0]
	width := max(len(strconv.AppendInt(num[:0], rows[0].ID, 10)), len(strconv.AppendInt(num[:0], rows[len(rows)-1].ID, 10)))
	var sb strings.Builder
	sb.Grow(len(rows) * width)
	for _, r := range rows {
		sb.Write(strconv.AppendInt(num[:0], r.ID, 10))
		ends = append(ends, int32(sb.Len()))
	}
	ids := sb.String()
	at := int32(0)
	for i, r := range rows {
		ds[i] = delivery{rt: rt, id: r.ID, idStr: ids[at:ends[i]], attempt: r.Attempt, payload: r.Payload, headers: r.Headers, createdAt: r.CreatedAt}
		at = ends[i]
	}
	return ds
}
