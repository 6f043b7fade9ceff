package snowkeyotel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/snowkeyhq/snowkey/extra/snowkeyotel"
	"github.com/snowkeyhq/snowkey/tokens"
)

// The Manager calls its Observer around each call; here the calls are
// made by hand, to show the spans they record.
func ExampleNewTokens() {
	spans := tracetest.NewSpanRecorder()
	obs, err := snowkeyotel.NewTokens(snowkeyotel.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
	})
	if err != nil {
		panic(err)
	}
	_ = tokens.Options{Observer: obs} // what tokens.New takes

	ctx := obs.Start(context.Background(), tokens.OpValidate)
	obs.End(ctx, tokens.OpValidate, tokens.ErrInvalidToken)
	s := spans.Ended()[0]
	fmt.Println(s.Name(), s.Attributes()[0].Value.AsString(), s.Status().Code)
	// Output: snowkey.tokens.validate invalid Unset
}
