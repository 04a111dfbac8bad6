package eventplugin

import "github.com/hashicorp/go-plugin"

// ProtocolVersion is the application protocol this package speaks: the version of the
// EventPlugin gRPC service (internal/wire/eventplugin.proto). The host and the plugin agree on
// it during the handshake; a plugin built for another version is refused with a
// ProtocolError.
const ProtocolVersion = 1

// PluginName is the name under which the event plugin is served and dispensed.
const PluginName = "settle-events"

// Handshake is the go-plugin handshake of settle's event plugins. The magic cookie is not a
// security measure: it makes a plugin binary run directly refuse with a friendly message, and
// it tells the host apart from the hosts of other go-plugin plugins. Use SHA256 (Load's
// option) to make sure the binary is the one you expect.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "SETTLE_EVENT_PLUGIN",
	MagicCookieValue: "4f1c7e0a-settle-custom-events",
}

// pluginSets are the versioned plugin sets of a plugin or host serving impl.
func pluginSets(impl Handler) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &GRPCPlugin{Impl: impl}}}
}
