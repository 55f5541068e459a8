module redlock-cross-worker

go 1.24

require github.com/redlock-sdk/redlock-go v0.0.0

replace github.com/redlock-sdk/redlock-go => ../../../bindings/go
