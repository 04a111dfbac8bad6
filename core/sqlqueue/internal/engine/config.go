package engine

import (
	"fmt"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Defaults of the mount options (sqlqueue re-exports them).
const (
	DefaultLease            = 30 * time.Second
	DefaultPollInterval     = time.Second
	DefaultFlushLinger      = 20 * time.Millisecond
	DefaultMaxFlush         = 500
	DefaultLockTimeout      = 5 * time.Second
	DefaultMaxBatch         = 500
	DefaultStatementTimeout = 30 * time.Second
	// MaxBaseBatch caps the base claim size (10 rows per worker) when no BatchSize is given.
	MaxBaseBatch = 100
)

// Option names one mount option of package sqlqueue, so that a form can refuse one it does not
// read, naming it.
type Option uint16

// The mount options a subscription may be given.
const (
	OptTransactional Option = 1 << iota
	OptLeaseFor
	OptBatchSize
	OptPollInterval
	OptCountAtClaim
	OptPerMessage
	OptFlushLimits
	OptLockTimeout
	OptStatementTimeout
	OptAdvisoryKey
	OptOnEvent
	numOptions = iota
)

var optionNames = [numOptions]string{"sqlqueue.Transactional()", "sqlqueue.LeaseFor", "sqlqueue.BatchSize",
	"sqlqueue.PollInterval", "sqlqueue.CountAtClaim", "sqlqueue.PerMessage()", "sqlqueue.FlushLimits",
	"sqlqueue.LockTimeout", "sqlqueue.StatementTimeout", "sqlqueue.AdvisoryKey", "sqlqueue.OnEvent"}

func (o Option) String() string {
	for i := range numOptions {
		if o == 1<<i {
			return optionNames[i]
		}
	}
	return "sqlqueue option(?)"
}

// Config is the engine's part of a subscription's options.
type Config struct {
	Transactional bool
	Lease         time.Duration
	Batch         int
	BatchAuto     bool // no BatchSize: the lease and row-lock forms size their claims
	BatchMax      int  // with BatchAuto: the largest automatic claim
	Poll          time.Duration
	PerMessage    bool
	MaxFlush      int
	Linger        time.Duration
	AdvisoryKey   string
	Events        [NumEvents]Event
	LockWait      time.Duration
	StmtTimeout   time.Duration
	Count         int8   // row lock: 0 default (count at claim with a cap), 1 on, -1 off
	Given         Option // the options given
}

// DefaultConfig is the options of a subscription given none.
func DefaultConfig() *Config {
	return &Config{Lease: DefaultLease, Poll: DefaultPollInterval, MaxFlush: DefaultMaxFlush, Linger: DefaultFlushLinger,
		LockWait: DefaultLockTimeout, StmtTimeout: DefaultStatementTimeout}
}

// ConfigKey is the key of the engine's options among a subscription's (core.Options.Ext).
type ConfigKey struct{}

// ConfigOf returns the engine's options of a subscription (the defaults when none was given);
// endpoints call it while they open, which tells core the options were understood.
func ConfigOf(o *core.Options) Config {
	if v, ok := o.Ext(ConfigKey{}); ok {
		return *v.(*Config)
	}
	return *DefaultConfig()
}

// Refuse returns an error naming the first option given that form does not read (reads lists
// those it does), so that no option is accepted and ignored.
func (c *Config) Refuse(queue string, form driver.Form, reads Option) error {
	extra := c.Given &^ reads
	if extra == 0 {
		return nil
	}
	for i := range numOptions {
		if o := Option(1) << i; extra&o != 0 {
			return fmt.Errorf("sqlqueue: queue %q: option %v does not apply to the %v form, which would ignore it; it configures another claim form", queue, o, form)
		}
	}
	return nil
}

// SizeClaims sets the claim size of a subscription given no BatchSize: 10 rows per worker, at
// most MaxBaseBatch, growing (auto) up to what one grouped flush settles.
func (c *Config) SizeClaims(workers int, auto bool) {
	if c.Batch != 0 {
		return
	}
	c.Batch = min(10*max(workers, 1), MaxBaseBatch)
	c.BatchAuto = auto
	// A claim's settlements fit one grouped flush: a larger claim would have the settler flush
	// part of it on its own, racing the claim cycle that settles the rest.
	c.BatchMax = max(c.Batch, min(DefaultMaxBatch, c.MaxFlush))
}
