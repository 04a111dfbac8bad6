package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// TxSource begins the transaction a handler writes through in transactional mode: a form's
// delivery, which knows where its row is held (a new transaction, its claim's, its connection's).
type TxSource interface {
	BeginHandlerTx(ctx context.Context) (driver.Transaction, error)
}

// WithTx puts the delivery into the handler's context in transactional mode, for Tx; src
// begins the transaction on first use.
func (d *Delivery) WithTx(ctx context.Context, src TxSource) context.Context {
	if !d.rt.Cfg.Transactional {
		return ctx
	}
	d.hctx = &HandlerTx{src: src}
	return context.WithValue(ctx, txKey{}, d.hctx)
}

// InTx reports whether the handler was given a transaction (transactional mode), used or not.
func (d *Delivery) InTx() bool { return d.hctx != nil }

// OpenTx returns the handler's begun transaction, nil when the handler never used it.
func (d *Delivery) OpenTx() *HandlerTx {
	if d.hctx == nil || !d.hctx.begun || d.hctx.err != nil {
		return nil
	}
	return d.hctx
}

type txKey struct{}

// ErrNotTransactional is returned by Tx for a handler not mounted with Transactional().
var ErrNotTransactional = errors.New("sqlqueue: no delivery transaction in this context (mount the handler with sqlqueue.Transactional())")

// HandlerTx is the handler's view of its delivery's transaction: it begins on first use and
// cannot be committed or rolled back by the handler (the outcome decides).
type HandlerTx struct {
	src    TxSource
	tx     driver.Transaction // begun lazily; in the row-lock form, the claim transaction
	begun  bool
	err    error
	closed bool
}

// Tx is the transaction underneath, for the settlement.
func (h *HandlerTx) Tx() driver.Transaction { return h.tx }

// Close ends the handler's use of the transaction: the settlement commits or rolls it back.
func (h *HandlerTx) Close() { h.closed = true }

func (h *HandlerTx) Exec(ctx context.Context, sql string, args ...any) (driver.Result, error) {
	if h.closed {
		return driver.Result{}, errSettled
	}
	return h.tx.Exec(ctx, sql, args...)
}

func (h *HandlerTx) Query(ctx context.Context, sql string, args ...any) (driver.Rows, error) {
	if h.closed {
		return nil, errSettled
	}
	return h.tx.Query(ctx, sql, args...)
}

var (
	errSettled  = errors.New("sqlqueue: the delivery's transaction is finished")
	errOutcomes = errors.New("sqlqueue: a delivery's transaction is committed or rolled back by the handler's outcome, not by the handler")
)

func (h *HandlerTx) Commit(context.Context) error   { return errOutcomes }
func (h *HandlerTx) Rollback(context.Context) error { return errOutcomes }
func (h *HandlerTx) Unwrap() any                    { return h.tx.Unwrap() }

var _ driver.Transaction = (*HandlerTx)(nil)

// Tx returns the transaction of the delivery the handler is working on, in a subscription
// mounted with Transactional() (see sqlqueue.Tx).
func Tx(ctx context.Context) (driver.Transaction, error) {
	h, ok := ctx.Value(txKey{}).(*HandlerTx)
	if !ok {
		return nil, ErrNotTransactional
	}
	if h.begun {
		return h, h.err
	}
	h.begun = true
	// The outcome ends the transaction, not the handler's context.
	h.tx, h.err = h.src.BeginHandlerTx(context.WithoutCancel(ctx))
	if h.err != nil {
		h.err = fmt.Errorf("sqlqueue: beginning the delivery's transaction: %w", h.err)
	}
	return h, h.err
}
