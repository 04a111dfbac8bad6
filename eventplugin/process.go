package eventplugin

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-plugin"
)

// process is one run of the plugin binary: go-plugin's client, the flag that quiets
// go-plugin's complaints about a kill the host meant, and the OS thread that started it.
//
// The thread is held for as long as the process runs: Linux delivers the parent-death signal
// (setDeathSignal) when the thread that forked the child exits, not only the process, and the
// Go runtime ends a thread whose locked goroutine exits. A thread of its own, locked and parked
// until the process is killed, can only end with the host.
type process struct {
	client  *plugin.Client
	quiet   *atomic.Bool
	release chan struct{}
	once    sync.Once
}

// startProcess starts client's process (go-plugin's Client: start and handshake) on a thread of
// its own and returns it with the handshake's outcome. On error the process is not killed yet:
// call kill (after reading what it wrote).
func startProcess(client *plugin.Client, quiet *atomic.Bool) (*process, plugin.ClientProtocol, error) {
	pr := &process{client: client, quiet: quiet, release: make(chan struct{})}
	type result struct {
		proto plugin.ClientProtocol
		err   error
	}
	started := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		proto, err := client.Client()
		started <- result{proto, err}
		<-pr.release
		runtime.UnlockOSThread()
	}()
	r := <-started
	return pr, r.proto, r.err
}

// kill ends the process and frees its thread. deliberate says the host has reported why
// (a failed start, a crash, a hang): go-plugin's warnings about the kill become debug lines.
func (pr *process) kill(deliberate bool) {
	if deliberate {
		pr.quiet.Store(true)
	}
	pr.client.Kill()
	pr.once.Do(func() { close(pr.release) })
}
