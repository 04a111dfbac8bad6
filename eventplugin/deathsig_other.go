//go:build !linux

package eventplugin

import "os/exec"

// setDeathSignal does nothing where the system has no parent-death signal: Serve's watch of
// its parent ends the plugin when the host goes away.
func setDeathSignal(*exec.Cmd) {}
