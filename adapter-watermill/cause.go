package settlewatermill

import (
	"context"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"
)

// RecordErrors is Watermill router middleware that tells settle why a handler failed: the
// router nacks a message whose handler returned an error but passes the error on to no one, so
// without it a retry and a dead letter only say at which attempt they happened. With it the
// error becomes the retry's cause: logged with the message, kept in a SQL row's last_error
// column, and the dead letter's reason (core.HeaderError). Add it to the router
// (router.AddMiddleware(settlewatermill.RecordErrors)) or to one handler.
func RecordErrors(h message.HandlerFunc) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		msgs, err := h(m)
		if err != nil {
			if c, ok := m.Context().Value(causeKey{}).(*cause); ok {
				c.err.Store(&err)
			}
		}
		return msgs, err
	}
}

type causeKey struct{}

// cause is where RecordErrors leaves a handler's error for the subscription that handed the
// message out.
type cause struct{ err atomic.Pointer[error] }

func (c *cause) get() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

func withCause(ctx context.Context, c *cause) context.Context {
	return context.WithValue(ctx, causeKey{}, c)
}
