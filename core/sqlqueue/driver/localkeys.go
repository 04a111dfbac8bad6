package driver

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// LocalKeys is the advisory key registry of an embedded database (SQLite and the like) that has
// no advisory locks of its own. Keys live in this process's memory, one registry per database
// file, held by the Conn that took them; a connection's keys go when it is discarded
// (ReleaseConn), as a server's advisory locks go with its session.
//
// Keys in memory serialise the subscriptions of one process only, so an advisory subscription
// also holds an exclusive lock on a companion file next to the database (its name plus
// "-settle-keys") for as long as it runs (Hold): a second process that opens the advisory form
// on the same file is refused with an error naming the holder, instead of handling the rows the
// first one holds. The operating system releases that lock when the process ends, however it
// ends.
//
// A dialect embeds it: TryLock and Unlock back AdvisoryDialect's, ReleaseConn runs in its
// Conn's Discard, and Hold in its advisory endpoint's Open (released when the source closes).
type LocalKeys struct {
	path string

	mu   sync.Mutex
	held map[string]Conn

	fileMu sync.Mutex
	users  int
	file   *os.File
}

var localKeys = struct {
	sync.Mutex
	m map[string]*LocalKeys
}{m: map[string]*LocalKeys{}}

// LocalKeysFor returns the registry of the database file at path (absolute, as the dialect
// names the file everywhere): every caller in the process on that file shares it.
func LocalKeysFor(path string) *LocalKeys {
	localKeys.Lock()
	defer localKeys.Unlock()
	k := localKeys.m[path]
	if k == nil {
		k = &LocalKeys{path: path, held: map[string]Conn{}}
		localKeys.m[path] = k
	}
	return k
}

// TryLock takes key for c without waiting and reports whether c holds it now. It is
// re-entrant: a key c already holds is granted again (and one Unlock releases it).
func (k *LocalKeys) TryLock(c Conn, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h, ok := k.held[key]; ok && h != c {
		return false
	}
	k.held[key] = c
	return true
}

// Unlock releases key if c holds it; a key c does not hold is left alone.
func (k *LocalKeys) Unlock(c Conn, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[key] == c {
		delete(k.held, key)
	}
}

// ReleaseConn releases every key c holds: call it when c is discarded (its session ends).
func (k *LocalKeys) ReleaseConn(c Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, h := range k.held {
		if h == c {
			delete(k.held, key)
		}
	}
}

// Held reports how many keys are held, for tests and metrics.
func (k *LocalKeys) Held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}

// ErrKeysHeldElsewhere is wrapped by Hold's error when another process holds the companion
// file's lock: it uses the advisory form on the same database file.
var ErrKeysHeldElsewhere = errors.New("sqlqueue: another process uses the advisory form on this database file")

// CompanionPath is the file whose lock Hold takes: the database file's path plus
// "-settle-keys".
func (k *LocalKeys) CompanionPath() string { return k.path + "-settle-keys" }

// Hold takes the companion file's exclusive lock for an advisory subscription of this process
// (the first Hold takes it, later ones share it) and returns the function that gives the
// subscription's share back; the lock is released when the last share is. It fails, wrapping
// ErrKeysHeldElsewhere, when another process holds the lock.
func (k *LocalKeys) Hold() (release func(), err error) {
	k.fileMu.Lock()
	defer k.fileMu.Unlock()
	if k.users == 0 {
		f, err := lockFile(k.CompanionPath())
		if err != nil {
			if errors.Is(err, errLocked) {
				holder := ""
				if b, rerr := os.ReadFile(k.CompanionPath()); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
					holder = " (pid " + strings.TrimSpace(string(b)) + ")"
				}
				return nil, fmt.Errorf("%w: %s is locked by another process%s. Advisory keys live in one process's memory, so a second process would handle the rows the first holds: run one process with the advisory form per database file, or use the lease form for several",
					ErrKeysHeldElsewhere, k.CompanionPath(), holder)
			}
			return nil, fmt.Errorf("sqlqueue: locking %s for the advisory form: %w", k.CompanionPath(), err)
		}
		// The holder's pid, for the error a refused process reports.
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		k.file = f
	}
	k.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			k.fileMu.Lock()
			defer k.fileMu.Unlock()
			k.users--
			if k.users == 0 && k.file != nil {
				_ = k.file.Close() // closing the descriptor releases the lock
				k.file = nil
			}
		})
	}, nil
}

// errLocked is what lockFile returns when another process holds the lock.
var errLocked = errors.New("locked")
