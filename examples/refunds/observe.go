package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/ops"
	settleotel "github.com/settlehq/settle/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Observability is what the -metrics and -trace flags set up: settle's OpenTelemetry
// instrumentation (settleotel), metrics scraped by Prometheus on /metrics, health probes on
// /livez and /readyz (core.HealthHandler), and spans printed as JSON to a writer.
type Observability struct {
	// Telemetry instruments the App; nil when neither flag is set.
	Telemetry *settleotel.Telemetry
	// Addr is where /metrics, /livez and /readyz are served ("" without -metrics).
	Addr string

	app      atomic.Pointer[core.App]
	srv      *http.Server
	shutdown []func(context.Context) error
}

// StartObservability sets up what metricsAddr (host:port, "" for none) and trace ask for: a
// Prometheus registry fed by the OpenTelemetry Prometheus exporter, served with the App's
// health probes on metricsAddr, and a tracer provider that prints every span to traces.
func StartObservability(metricsAddr string, trace bool, traces io.Writer, log *slog.Logger) (*Observability, error) {
	o := &Observability{}
	if metricsAddr == "" && !trace {
		return o, nil
	}
	res := resource.NewSchemaless(semconv.ServiceName("refunds"))
	var opts []settleotel.Option
	if trace {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(traces))
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
		o.shutdown = append(o.shutdown, tp.Shutdown)
		opts = append(opts, settleotel.WithTracerProvider(tp))
	}
	mux := http.NewServeMux()
	if metricsAddr != "" {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, err
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		o.shutdown = append(o.shutdown, mp.Shutdown)
		opts = append(opts, settleotel.WithMeterProvider(mp))
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		health := func(w http.ResponseWriter, r *http.Request) {
			app := o.app.Load()
			if app == nil {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
			core.HealthHandler(app).ServeHTTP(w, r)
		}
		mux.HandleFunc("GET /livez", health)
		mux.HandleFunc("GET /readyz", health)
	}
	tel, err := settleotel.New(opts...)
	if err != nil {
		return nil, err
	}
	o.Telemetry = tel
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("-metrics %s: %w", metricsAddr, err)
		}
		o.Addr = ln.Addr().String()
		o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("refunds: serving /metrics", "error", err)
			}
		}()
		log.Info("refunds: serving /metrics, /livez and /readyz", "addr", o.Addr)
	}
	return o, nil
}

// AppOptions instruments the App and makes it the one the health probes report on.
func (o *Observability) AppOptions() []core.AppOption {
	if o.Telemetry == nil {
		return nil
	}
	return append(o.Telemetry.AppOptions(), func(a *core.App) { o.app.Store(a) })
}

// ObserveQueues reports the depth of queues as gauges (settle.queue.messages), when metrics
// are on, until the returned function is called (before the queues' backend closes).
func (o *Observability) ObserveQueues(queues ...ops.Queue) (stop func(), err error) {
	if o.Telemetry == nil || o.srv == nil {
		return func() {}, nil
	}
	reg, err := o.Telemetry.ObserveQueues(queues...)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}

// Close stops serving and flushes the providers.
func (o *Observability) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if o.srv != nil {
		errs = append(errs, o.srv.Shutdown(ctx))
	}
	for _, f := range o.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
