module github.com/redlock-sdk/redlock-go

go 1.24
