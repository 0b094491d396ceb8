package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hangar-dev/hangar/internal/settings"
)

// newTracer returns the tracer of hangar's spans (a span per stream). Spans are exported with
// OTLP over HTTP when the standard OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variable is set (the exporter reads the other OTEL_*
// variables itself), unless OTEL_TRACES_EXPORTER=none; otherwise nothing is exported.
func newTracer(ctx context.Context) (trace.Tracer, func(), error) {
	_, endpoint := settings.LookupEnv("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, tracesEndpoint := settings.LookupEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if v, _ := settings.LookupEnv("OTEL_TRACES_EXPORTER"); v == "none" || (!endpoint && !tracesEndpoint) {
		return noop.NewTracerProvider().Tracer("hangar"), func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	name, ok := os.LookupEnv("OTEL_SERVICE_NAME")
	if !ok {
		name = "hangar"
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(name), semconv.ServiceVersion(version))))
	return tp.Tracer("hangar"), func() { tp.Shutdown(context.WithoutCancel(ctx)) }, nil
}
