// Command cdk is an AWS CDK app that deploys retrysafe's examples: the same
// stack as the SAM template (template.yaml at the repository root), with the
// idempotency table defined by the reusable construct in package
// idempotencytable.
//
// Synthesis builds the example programs (examples/payments,
// examples/function, examples/orders) for linux/arm64 with the local Go
// toolchain, into dist/<example>/arm64/bootstrap at the repository root (the
// layout of `make build`), unless the context value "binaries" names a
// directory that holds them already (<binaries>/<example>/arm64/bootstrap).
// See README.md.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// stackName is the CloudFormation stack the app deploys.
const stackName = "RetrysafeExamples"

func main() {
	defer jsii.Close()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cdk:", err)
		jsii.Close() // os.Exit skips the deferred call
		os.Exit(1)
	}
}

func run() error {
	app := newApp(nil)
	dirs, err := binaries(app)
	if err != nil {
		return err
	}
	NewStack(app, stackName, &StackProps{Code: func(example string) awslambda.Code {
		return awslambda.Code_FromAsset(jsii.String(dirs[example]), nil)
	}})
	app.Synth(nil)
	return nil
}

// newApp returns an App with featureFlags set; props may be nil. The CLI's
// context (cdk.json, --context) still takes precedence.
func newApp(props *awscdk.AppProps) awscdk.App {
	var p awscdk.AppProps
	if props != nil {
		p = *props
	}
	ctx := map[string]any{}
	for k, v := range featureFlags {
		ctx[k] = v
	}
	if p.Context != nil {
		for k, v := range *p.Context {
			ctx[k] = v
		}
	}
	p.Context = &ctx
	return awscdk.NewApp(&p)
}
