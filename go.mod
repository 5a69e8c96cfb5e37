module github.com/fanout-go/fanout

go 1.25.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
