module github.com/settlehq/settle/ci/testreport

go 1.25.0
