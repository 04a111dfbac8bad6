package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is River's job for the drain: an empty payload, a worker that does nothing.
type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
	all    chan struct{}
	n      int64
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.worked.Add(1) == w.n {
		close(w.all)
	}
	return nil
}

// riverDrain migrates River into schema s, inserts n jobs (not timed), then times a client
// with its fastest settings from start until every job has been worked and the client has
// stopped, which flushes its batched completions.
func riverDrain(ctx context.Context, pool *pgxpool.Pool, s string, n, maxWorkers int) (time.Duration, error) {
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return 0, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, fmt.Errorf("river migrate: %w", err)
	}
	w := &noopWorker{worked: new(atomic.Int64), all: make(chan struct{}), n: int64(n)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		Schema:            s,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		return 0, err
	}
	params := make([]river.InsertManyParams, 0, 10000)
	for done := 0; done < n; {
		params = params[:0]
		for i := 0; i < 10000 && done < n; i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{N: done}})
			done++
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return 0, fmt.Errorf("river insert: %w", err)
		}
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	select {
	case <-w.all:
	case <-ctx.Done():
		_ = client.Stop(context.Background())
		return 0, fmt.Errorf("river drain: %w after %d of %d jobs", ctx.Err(), w.worked.Load(), n)
	}
	if err := client.Stop(ctx); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	var completed int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.river_job WHERE state = 'completed'`, s)).Scan(&completed); err != nil {
		return 0, err
	}
	if completed != n {
		return 0, fmt.Errorf("river: %d of %d jobs completed after Stop", completed, n)
	}
	return elapsed, nil
}
