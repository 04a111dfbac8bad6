package eventplugin

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/settlehq/settle/core/clock"
)

// Option configures Load.
type Option func(*config) error

type config struct {
	callTimeout  time.Duration
	startTimeout time.Duration
	minBackoff   time.Duration
	maxBackoff   time.Duration
	logger       *slog.Logger
	clock        clock.Clock
	secure       *plugin.SecureConfig
	args         []string
	env          []string
	// noDeathSignal leaves the death signal off, so that tests can show Serve's own watch.
	noDeathSignal bool
}

func defaultConfig() config {
	return config{
		callTimeout:  5 * time.Second,
		startTimeout: 20 * time.Second,
		minBackoff:   500 * time.Millisecond,
		maxBackoff:   30 * time.Second,
		logger:       slog.Default(),
		clock:        clock.Real(),
	}
}

// CallTimeout bounds each call to the plugin (default 5 s). A plugin that does not answer in
// time fails the event (ErrTimeout) and is restarted.
//
// On SQLite keep it below the database's busy timeout (sqlite.BusyTimeout, 5 s by default):
// the call to the plugin happens inside the settlement's transaction, which holds the write
// lock, so every other writer waits for a hung plugin as long as the call timeout, and one
// that waits past its busy timeout fails with "database is locked".
func CallTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("eventplugin.CallTimeout(%v): the timeout must be positive", d)
		}
		c.callTimeout = d
		return nil
	}
}

// StartTimeout bounds the start of the plugin process, handshake included (default 20 s). A
// binary that stays silent past it is not a plugin (ErrNotPlugin).
func StartTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("eventplugin.StartTimeout(%v): the timeout must be positive", d)
		}
		c.startTimeout = d
		return nil
	}
}

// RestartBackoff sets the wait before restarting a crashed or hung plugin: min after the first
// failure, doubling after each failure without a successful call in between, up to max
// (defaults 500 ms and 30 s). The wait runs on the Plugin's clock.
func RestartBackoff(min, max time.Duration) Option {
	return func(c *config) error {
		if min <= 0 || max < min {
			return fmt.Errorf("eventplugin.RestartBackoff(%v, %v): need 0 < min <= max", min, max)
		}
		c.minBackoff, c.maxBackoff = min, max
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()). The plugin process's standard error and
// go-plugin's own messages go to it too.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("eventplugin.WithLogger(nil): a logger is required")
		}
		c.logger = l
		return nil
	}
}

// WithClock sets the clock the restart backoff runs on (default the wall clock); give it the
// App's clock.
func WithClock(cl clock.Clock) Option {
	return func(c *config) error {
		if cl == nil {
			return errors.New("eventplugin.WithClock(nil): a clock is required")
		}
		c.clock = cl
		return nil
	}
}

// Logger is WithLogger.
//
// Deprecated: use WithLogger, the name every settle module gives this option. Logger goes in
// the next release.
func Logger(l *slog.Logger) Option { return WithLogger(l) }

// Clock is WithClock.
//
// Deprecated: use WithClock, the name every settle module gives this option. Clock goes in the
// next release.
func Clock(cl clock.Clock) Option { return WithClock(cl) }

// SHA256 makes the host refuse to start a binary whose SHA-256 is not sum (ErrChecksum): the
// binary is checked before every start, restarts included.
func SHA256(sum []byte) Option {
	return func(c *config) error {
		if len(sum) != sha256.Size {
			return fmt.Errorf("eventplugin.SHA256: a SHA-256 sum has %d bytes, got %d", sha256.Size, len(sum))
		}
		c.secure = &plugin.SecureConfig{Checksum: append([]byte(nil), sum...), Hash: sha256.New()}
		return nil
	}
}

// SecureConfig passes go-plugin's SecureConfig through (another hash than SHA-256).
func SecureConfig(sc *plugin.SecureConfig) Option {
	return func(c *config) error {
		if sc == nil || len(sc.Checksum) == 0 || sc.Hash == nil {
			return errors.New("eventplugin.SecureConfig: a checksum and a hash are required")
		}
		c.secure = sc
		return nil
	}
}

// Args passes command-line arguments to the plugin binary.
func Args(args ...string) Option {
	return func(c *config) error {
		c.args = append(c.args, args...)
		return nil
	}
}

// Env adds "KEY=value" entries to the plugin's environment (which otherwise is the host's).
func Env(kv ...string) Option {
	return func(c *config) error {
		for _, e := range kv {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return fmt.Errorf("eventplugin.Env(%q): entries are KEY=value", e)
			}
		}
		c.env = append(c.env, kv...)
		return nil
	}
}
