module github.com/retrysafe/retrysafe

go 1.26.8

require (
	github.com/aws/aws-lambda-go v1.55.1
	github.com/jmespath-community/go-jmespath v1.1.1
	github.com/stretchr/testify v1.12.1
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20230314191032-db074128a8ec // indirect
)
