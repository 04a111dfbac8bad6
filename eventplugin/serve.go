package eventplugin

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Serve serves h as an event plugin and returns when the host ends the process. It is the
// whole main function of a plugin binary:
//
//	func main() { eventplugin.Serve(auditPlugin{}) }
//
// Run directly (not by a host), the binary prints that it is a plugin and exits with status 1.
// The plugin's standard error reaches the host's logger; write JSON lines in hclog's format
// (hclog.New with JSONFormat) to keep their levels.
//
// The process exits (status 3) when its host goes away, however the host ended: on Linux the
// host's Load already has the kernel kill it, and everywhere Serve watches its parent (on Unix,
// a change of its parent process id, checked twice a second; on Windows, the parent's exit).
func Serve(h Handler) {
	watchParent(func(why string) {
		fmt.Fprintf(os.Stderr, "eventplugin: %s; the plugin exits\n", why)
		os.Exit(3)
	})
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(h),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "eventplugin", Output: os.Stderr, JSONFormat: true, Level: hclog.Info,
		}),
	})
}
