package natsjs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core/periodic"
)

// TickClaims claims the ticks of periodic jobs (core/periodic) in a JetStream key-value bucket:
// a tick's claim is the creation of its key, which the server grants to exactly one process (a
// second create of a key that exists fails with jetstream.ErrKeyExists). The bucket keeps each
// claim for its TTL and then forgets it.
type TickClaims struct {
	c      *Conn
	bucket string
	ttl    time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue
}

var _ periodic.Claimer = (*TickClaims)(nil)

// NewTickClaims returns claims in bucket on c, created at the first claim if it does not exist,
// with claims kept for ttl (at least a minute; keep it longer than any periodic.CatchUpLast
// window, or a restart may publish a forgotten tick again).
func NewTickClaims(c *Conn, bucket string, ttl time.Duration) (*TickClaims, error) {
	switch {
	case c == nil:
		return nil, errors.New("natsjs.NewTickClaims: no connection")
	case bucket == "" || !validBucket(bucket):
		return nil, fmt.Errorf("natsjs.NewTickClaims(%q): a bucket name is letters, digits, - and _", bucket)
	case ttl < time.Minute:
		return nil, fmt.Errorf("natsjs.NewTickClaims(%q): keep claims for a minute at least, not %v", bucket, ttl)
	}
	return &TickClaims{c: c, bucket: bucket, ttl: ttl}, nil
}

func validBucket(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// ClaimTick creates the tick's key: true when this call created it.
func (t *TickClaims) ClaimTick(ctx context.Context, schedule string, tick time.Time) (bool, error) {
	kv, err := t.store(ctx)
	if err != nil {
		return false, err
	}
	_, err = kv.Create(ctx, tickKey(schedule, tick), nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyExists):
		return false, nil
	}
	return false, fmt.Errorf("natsjs: claiming tick %s in bucket %s: %w", periodic.TickID(schedule, tick), t.bucket, err)
}

// tickKey names a tick within the bucket's key alphabet: the schedule's name in unpadded
// base64url (job names may hold any character) and the tick in UTC.
func tickKey(schedule string, tick time.Time) string {
	return base64.RawURLEncoding.EncodeToString([]byte(schedule)) + "." + tick.UTC().Format("20060102T150405Z")
}

// store opens the bucket, creating it if it does not exist.
func (t *TickClaims) store(ctx context.Context) (jetstream.KeyValue, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kv != nil {
		return t.kv, nil
	}
	js, err := t.c.jetStream()
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, t.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: t.bucket, TTL: t.ttl,
			Description: "settle: claims of periodic ticks"})
		if errors.Is(err, jetstream.ErrBucketExists) { // another process created it meanwhile
			kv, err = js.KeyValue(ctx, t.bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsjs: opening tick bucket %s: %w", t.bucket, err)
	}
	t.kv = kv
	return kv, nil
}
