package main

import (
	"time"

	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// setupAMQP registers a broker connection with the App and returns the classic or quorum queue
// endpoint, declared by the worker (the quorum cap needs it).
func setupAMQP(app *core.App, w *worker) (core.Endpoint, []core.Option, func(), error) {
	cfg := w.cfg
	b, err := amqp.New(amqp.URL(cfg.dsn), amqp.DeclareTopology(true), amqp.WithLogger(w.log),
		amqp.ReconnectBackoff(50*time.Millisecond, time.Second))
	if err != nil {
		return nil, nil, nil, err
	}
	app.Register(b)
	w.describe = func(d core.Delivery, e *chaos.Entry) {
		switch x := d.(type) {
		case *amqp.QuorumDelivery:
			e.Tag, e.Redelivered, e.Count = x.Raw().DeliveryTag, x.Redelivered(), x.RedeliveryCount()
		case *amqp.Delivery:
			e.Tag, e.Redelivered = x.Raw().DeliveryTag, x.Redelivered()
		}
	}
	var common []amqp.QueueOption
	if cfg.delay == "dlxttl" {
		common = append(common, amqp.DLXTTL())
	}
	if cfg.prefetch > 0 {
		common = append(common, amqp.Prefetch(cfg.prefetch))
	}
	if cfg.queueType == "quorum" {
		var opts []amqp.QuorumOption
		for _, o := range common {
			opts = append(opts, o)
		}
		q, err := amqp.Quorum(b, cfg.queue, opts...)
		return q, nil, nil, err
	}
	var opts []amqp.ClassicOption
	for _, o := range common {
		opts = append(opts, o)
	}
	switch cfg.publish {
	case "confirmed":
		opts = append(opts, amqp.PublishWith(amqp.Confirmed))
	case "fire-and-forget":
		opts = append(opts, amqp.PublishWith(amqp.FireAndForget))
	}
	q, err := amqp.Classic(b, cfg.queue, opts...)
	return q, nil, nil, err
}
