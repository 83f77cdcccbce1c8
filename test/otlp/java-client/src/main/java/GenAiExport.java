import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.DoubleHistogram;
import io.opentelemetry.api.metrics.LongHistogram;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.autoconfigure.AutoConfiguredOpenTelemetrySdk;
import io.opentelemetry.sdk.common.CompletableResultCode;
import java.util.concurrent.TimeUnit;

/**
 * A gateway's GenAI metrics through the OpenTelemetry Java SDK, configured by OTEL_* variables
 * alone. Each argument is one export interval: calls separated by ",", each
 * "model:provider:inputTokens:outputTokens:seconds". After each interval the meter provider is
 * flushed (one export); exits 2 when an export failed.
 */
public final class GenAiExport {
  private static final AttributeKey<String> OPERATION = AttributeKey.stringKey("gen_ai.operation.name");
  private static final AttributeKey<String> MODEL = AttributeKey.stringKey("gen_ai.request.model");
  private static final AttributeKey<String> PROVIDER = AttributeKey.stringKey("gen_ai.provider.name");
  private static final AttributeKey<String> TOKEN_TYPE = AttributeKey.stringKey("gen_ai.token.type");

  public static void main(String[] args) {
    OpenTelemetrySdk sdk = AutoConfiguredOpenTelemetrySdk.initialize().getOpenTelemetrySdk();
    Meter meter = sdk.meterBuilder("vigil-java-client").setInstrumentationVersion("1.0.0").build();
    LongHistogram tokens =
        meter.histogramBuilder("gen_ai.client.token.usage").setUnit("{token}").ofLongs().build();
    DoubleHistogram duration = meter.histogramBuilder("gen_ai.client.operation.duration").setUnit("s").build();
    int failed = 0;
    for (String interval : args) {
      for (String call : interval.split(",")) {
        String[] f = call.split(":");
        Attributes base = Attributes.of(OPERATION, "chat", MODEL, f[0], PROVIDER, f[1]);
        tokens.record(Long.parseLong(f[2]), base.toBuilder().put(TOKEN_TYPE, "input").build());
        tokens.record(Long.parseLong(f[3]), base.toBuilder().put(TOKEN_TYPE, "output").build());
        duration.record(Double.parseDouble(f[4]), base);
      }
      CompletableResultCode flushed = sdk.getSdkMeterProvider().forceFlush().join(20, TimeUnit.SECONDS);
      if (!flushed.isSuccess()) failed++;
    }
    CompletableResultCode down = sdk.shutdown().join(20, TimeUnit.SECONDS);
    if (!down.isSuccess()) failed++;
    System.out.println("exports failed: " + failed);
    System.exit(failed == 0 ? 0 : 2);
  }
}
