package eventplugin

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has Linux kill the plugin process when the host process dies.
//
// The signal is tied to the thread that started the process; the Go runtime does not end its
// threads while the process lives (only a thread locked by an exiting goroutine, which settle
// does not do), and Serve's own watch of its parent covers the rest.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
