package streamjoin.loop;

import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.metrics.source.Source;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * The newest batch's figures as a source of Spark's metrics system, named {@code streamjoin}:
 * a gauge per number of the row {@link ProgressFigures#publish} is given, in either loop, so
 * that Spark's own sinks (JMX, its Prometheus servlet, CSV, Graphite, ...) report them as
 * {@code <namespace>.driver.streamjoin.<figure>}. Registered with the driver's metrics system on
 * the first batch. Written for janino: no lambdas, no generics.
 */
public final class FiguresSource implements Source {
  static final FiguresSource INSTANCE = new FiguresSource();

  final MetricRegistry registry = new MetricRegistry();
  final ConcurrentHashMap values = new ConcurrentHashMap();  // (figure -> its newest Number)
  Object registeredWith;  // (the metrics system it is registered with: a new context's anew)

  public String sourceName() {
    return "streamjoin";
  }

  public MetricRegistry metricRegistry() {
    return registry;
  }

  /** Sets the figures from {@code row} (an {@code UnsafeRow} of {@code fields} fields), whose
   * {@code kinds} name each field and its kind, {@code name:L} (a long), {@code name:D} (a
   * double) or another (not a number: left out), comma-separated. */
  static synchronized void set(byte[] row, int fields, String kinds) {
    UnsafeRow value = new UnsafeRow(fields);
    value.pointTo(row, row.length);
    String[] named = kinds.split(",");
    for (int i = 0; i < named.length && i < fields; i++) {
      String[] parts = named[i].split(":");
      if (parts.length != 2 || !("L".equals(parts[1]) || "D".equals(parts[1]))) {
        continue;
      }
      Number got;  // (a figure the batch has not, a watermark's lag before one: NaN)
      if (value.isNullAt(i)) {
        got = Double.valueOf(Double.NaN);
      } else if ("L".equals(parts[1])) {
        got = Long.valueOf(value.getLong(i));
      } else {
        got = Double.valueOf(value.getDouble(i));
      }
      if (INSTANCE.values.put(parts[0], got) == null) {
        INSTANCE.registry.register(parts[0], new Figure(parts[0]));
      }
    }
    SparkEnv env = SparkEnv.get();
    if (env != null && INSTANCE.registeredWith != env.metricsSystem()) {
      env.metricsSystem().registerSource(INSTANCE);
      INSTANCE.registeredWith = env.metricsSystem();
    }
  }

  /** What the driver's metrics system holds of every source named {@code streamjoin}, as
   * Spark's sinks read it: {@code name=value} per gauge, comma-separated, sorted by name (for
   * tests and `streamjoin` checks; py4j cannot reach the metrics system itself). */
  public static String reported() {
    StringBuilder out = new StringBuilder();
    scala.collection.Iterator sources =
        SparkEnv.get().metricsSystem().getSourcesByName("streamjoin").iterator();
    while (sources.hasNext()) {
      java.util.SortedMap gauges = ((Source) sources.next()).metricRegistry().getGauges();
      java.util.Iterator it = gauges.entrySet().iterator();
      while (it.hasNext()) {
        java.util.Map.Entry e = (java.util.Map.Entry) it.next();
        out.append(out.length() == 0 ? "" : ",").append(e.getKey()).append("=");
        out.append(((Gauge) e.getValue()).getValue());
      }
    }
    return out.toString();
  }

  static final class Figure implements Gauge {
    final String name;

    Figure(String name) {
      this.name = name;
    }

    public Object getValue() {
      return INSTANCE.values.get(name);
    }
  }
}
