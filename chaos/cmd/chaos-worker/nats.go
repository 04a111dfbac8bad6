package main

import (
	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/core"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// setupNATS registers a NATS connection with the App and returns the queue on the -queue
// subject, declared by the worker with the lease (AckWait) of -lease.
func setupNATS(app *core.App, w *worker) (core.Endpoint, []core.Option, func(), error) {
	cfg := w.cfg
	c, err := natsjs.New(cfg.dsn, natsjs.DeclareTopology(true), natsjs.WithLogger(w.log))
	if err != nil {
		return nil, nil, nil, err
	}
	app.Register(c)
	w.describe = func(d core.Delivery, e *chaos.Entry) {
		if x, ok := d.(*natsjs.Delivery); ok {
			e.Tag = x.StreamSequence()
		}
	}
	q, err := natsjs.NewQueue(c, cfg.queue, natsjs.AckWait(cfg.lease))
	return q, nil, nil, err
}
