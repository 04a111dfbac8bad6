#!/usr/bin/env bash
# Validates the refunds example's AsyncAPI documents with the AsyncAPI project's own parser
# (@asyncapi/parser, from the npm registry): the committed ones (docs/asyncapi/) and the ones the
# service writes now through `settle asyncapi`, which must equal them. The parser is installed
# once into the user's cache (node and npm from Debian's packages when missing).
#
#   bash ci/asyncapi.sh
set -euo pipefail
cd "$(dirname "$0")/.."

version=3.6.6 # @asyncapi/parser
dir=${XDG_CACHE_HOME:-$HOME/.cache}/settle/asyncapi-parser-$version
if [ ! -f "$dir/node_modules/@asyncapi/parser/package.json" ]; then
	if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
		apt-get update -qq >/dev/null && apt-get install -y -qq nodejs npm >/dev/null
	fi
	mkdir -p "$dir"
	# --ignore-scripts: no install hooks (a dependency's postinstall reports to its vendor).
	npm install --no-audit --no-fund --ignore-scripts --prefix "$dir" "@asyncapi/parser@$version" >"$dir/install.log" 2>&1 || {
		cat "$dir/install.log"
		echo "ci/asyncapi.sh: npm could not install @asyncapi/parser@$version" >&2
		exit 1
	}
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/settle-asyncapi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/settle" ./cmd/settle
go build -o "$tmp/refunds" ./examples/refunds
# Each mode's document as the service writes it; nothing connects (the URLs are not dialled).
"$tmp/settle" asyncapi --out "$tmp/refunds-sqlite.yaml" -- "$tmp/refunds" 2>"$tmp/log" || { cat "$tmp/log"; exit 1; }
"$tmp/settle" asyncapi --out "$tmp/refunds-rabbitmq.yaml" -- "$tmp/refunds" -amqp amqp://guest:guest@127.0.0.1:5672/ 2>"$tmp/log" || { cat "$tmp/log"; exit 1; }
"$tmp/settle" asyncapi --out "$tmp/refunds-nats.json" -- "$tmp/refunds" -nats nats://127.0.0.1:4222 2>"$tmp/log" || { cat "$tmp/log"; exit 1; }

ASYNCAPI_PARSER_DIR="$dir" node ci/asyncapi/validate.mjs docs/asyncapi/*.yaml "$tmp"/refunds-*.yaml "$tmp"/refunds-nats.json

for mode in sqlite rabbitmq; do
	cmp -s "docs/asyncapi/refunds-$mode.yaml" "$tmp/refunds-$mode.yaml" || {
		diff "docs/asyncapi/refunds-$mode.yaml" "$tmp/refunds-$mode.yaml" | head -20
		echo "ci/asyncapi.sh: docs/asyncapi/refunds-$mode.yaml is stale: review the change, then (cd examples && go test ./refunds -run AsyncAPI -update)" >&2
		exit 1
	}
done
echo "ci/asyncapi.sh: the refunds documents are valid and current"
