module github.com/settlehq/settle/core

go 1.25.0
