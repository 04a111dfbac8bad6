module github.com/settlehq/settle/bench

go 1.26.0

replace github.com/settlehq/settle/core => ../core
