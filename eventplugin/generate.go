package eventplugin

//go:generate protoc --proto_path=internal/wire --go_out=internal/wire --go_opt=paths=source_relative --go-grpc_out=internal/wire --go-grpc_opt=paths=source_relative internal/wire/eventplugin.proto
