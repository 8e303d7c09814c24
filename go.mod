module github.com/retrysafe/retrysafe

go 1.26.8

require (
	github.com/aws/aws-lambda-go v1.55.1
	github.com/jmespath-community/go-jmespath v1.1.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20230314191032-db074128a8ec // indirect
	golang.org/x/sys v0.48.0 // indirect
)
