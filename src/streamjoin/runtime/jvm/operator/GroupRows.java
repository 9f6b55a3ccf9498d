package streamjoin.operator;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The rows a GROUP BY (or top-N) query buffers for its open windows, held in the driver's memory
 * by pane (the slide-long stretch of event time a row's time falls in), so that a closing window
 * reads the rows of its own panes from memory instead of every live unit of the buffer from the
 * checkpoint. The units stay the durable state: the tasks that write a batch's unit hand their
 * rows back with the counts ({@link #writeAll}); a unit not held (after a restart, on a cluster) is
 * read back once ({@link #hold}). Rows are held per batch, so a batch run again replaces its own.
 * Written for janino: no lambdas, raw collections.
 */
public final class GroupRows {
  /** The rows of each buffer's newest close ({@link #hand}), which the tasks of its DataFrame
   * ({@link #handed}) take in the driver's JVM (a read again finds them; the next replaces them). */
  static final ConcurrentHashMap HANDED = new ConcurrentHashMap();

  /** Rows of a read per task, at least. */
  static final int SLICE_ROWS = 20000;

  /** Held rows by buffer key (a processor's prefix, the query and its buffer's signature). */
  static final ConcurrentHashMap HELD = new ConcurrentHashMap();

  final int time;
  final long slide;
  final StructType schema;
  /** Pane start (micros) → its rows ({@link Kept}), in the order held. */
  final TreeMap panes = new TreeMap();
  /** The batches whose rows are held. */
  final HashSet batches = new HashSet();

  GroupRows(int time, long slide, StructType schema) {
    this.time = time;
    this.slide = slide;
    this.schema = schema;
  }

  /** A held row: its batch, its event time and the row. */
  static final class Kept {
    final long batch;
    final long ts;
    final InternalRow row;

    Kept(long batch, long ts, InternalRow row) {
      this.batch = batch;
      this.ts = ts;
      this.row = row;
    }
  }

  /**
   * Writes batch {@code batch}'s units of several buffers in one job, as Parquet by the tasks
   * that make their rows (any plan), and holds them: buffer {@code i}'s rows {@code rows[i]} into
   * {@code dirs[i]}, held under {@code keys[i]} by their event time (column {@code times[i]},
   * micros) in panes of {@code slides[i]}. The tasks of every buffer run side by side (two
   * streams' GROUP BYs of one batch each read their own stream's partitions). Returns, per
   * buffer, its rows and their least and greatest event time (Long.MAX_VALUE and Long.MIN_VALUE
   * for none).
   */
  public static long[][] writeAll(
      Dataset[] rows, String[] dirs, String[] keys, int[] times, long[] slides, long batch)
      throws IOException {
    SparkSession spark = rows[0].sparkSession();
    Map set = CollectionConverters.asJava(spark.sessionState().conf().getAllConfs());
    StructType[] schemas = new StructType[rows.length];
    List paths = new ArrayList();
    JavaRDD all = null;
    org.apache.hadoop.conf.Configuration conf = null;
    int first = 0;  // (buffer i's first partition in the union of every buffer's)
    for (int i = 0; i < rows.length; i++) {
      schemas[i] = rows[i].schema().asNullable();
      BatchWrite w = BatchWrite.prepare(spark, set, new HashMap(), schemas[i]);
      conf = w.conf;
      JavaRDD made = rows[i].queryExecution().toRdd().toJavaRDD();
      FlatMapFunction write = JointWrite.task(spark, w, dirs[i], batch, first);
      HeldCopies.Tee tee = new HeldCopies.Tee(times[i], write, null);
      JavaRDD tagged = PlainRdd.mapPartitions(made, new HeldCopies.Tagged(i, tee));
      all = all == null ? tagged : all.union(tagged);
      first += made.getNumPartitions();
      paths.add(dirs[i]);
    }
    List parts = BatchWrite.written(all, null, paths, conf);  // (each buffer's tee above)
    long[][] out = new long[rows.length][];
    for (int i = 0; i < rows.length; i++) {
      List mine = new ArrayList();
      for (int p = 0; p < parts.size(); p++) {
        Object[] part = (Object[]) parts.get(p);
        if (((Integer) part[0]).intValue() == i) {
          mine.add(part[1]);
        }
      }
      out[i] = held(keys[i], times[i], slides[i], schemas[i]).replace(batch, mine);
    }
    return out;
  }

  /** Whether {@code frame}'s plan gives the same rows of the same input at every run: no
   * expression that is not deterministic, no current time (optimisation makes it a constant)
   * and no subquery (run once per plan). A plan made once and run at every close must be. */
  public static boolean runsAlike(Dataset frame) {
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan analysed =
        frame.queryExecution().analyzed();
    org.apache.spark.sql.catalyst.trees.TreePattern$ is =
        org.apache.spark.sql.catalyst.trees.TreePattern$.MODULE$;
    return analysed.deterministic()
        && !analysed.containsPattern(is.CURRENT_LIKE())
        && !analysed.containsPattern(is.PLAN_EXPRESSION());
  }

  /** Holds {@code rows}, units of buffer {@code key} read back, each row's batch in its last
   * column {@code time}'s index as in {@link #writeAll}); returns the rows held. */
  public static long hold(Dataset rows, String key, int time, long slide) {
    JavaRDD rdd = rows.queryExecution().toRdd().toJavaRDD();
    StructType read = rows.schema().asNullable();
    int last = read.fields().length - 1;
    org.apache.spark.sql.types.StructField[] fields =
        new org.apache.spark.sql.types.StructField[last];
    System.arraycopy(read.fields(), 0, fields, 0, last);
    StructType schema = new StructType(fields);
    HeldCopies.Tee tee = new HeldCopies.Tee(time, null, read);
    List parts = PlainRdd.collect(PlainRdd.mapPartitions(rdd, tee));
    return held(key, time, slide, schema).replace(-1L, parts)[0];
  }

  /** Whether batch {@code batch}'s rows of buffer {@code key} are held. */
  public static boolean holds(String key, long batch) {
    GroupRows g = (GroupRows) HELD.get(key);
    return g != null && g.batches.contains(Long.valueOf(batch));
  }

  /** The held rows of buffer {@code key} from {@code batches} (their ids, comma-separated)
   * whose event time is in {@code [from, upto)}, as a DataFrame whose tasks carry them (a
   * cluster's executors). */
  public static Dataset rows(
      SparkSession spark, String key, String batches, long from, long upto) {
    GroupRows g = (GroupRows) HELD.get(key);
    ArrayList out = g.chosen(batches, from, upto);
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    int slices = Math.max(1, Math.min(jsc.defaultParallelism(), out.size() / SLICE_ROWS));
    return spark.internalCreateDataFrame(jsc.parallelize(out, slices).rdd(), g.schema, false);
  }

  /** Hands the rows {@link #rows} would read to the tasks of {@link #handed}'s DataFrame of
   * buffer {@code key}, in the driver's JVM, each row carrying the bounds of the window ends
   * to write: {@code (after, last]}. */
  public static void hand(
      String key, String batches, long from, long upto, long after, long last) {
    GroupRows g = (GroupRows) HELD.get(key);
    ArrayList out = g.chosen(batches, from, upto);
    GenericInternalRow bounds =
        new GenericInternalRow(new Object[] {Long.valueOf(after), Long.valueOf(last)});
    for (int i = 0; i < out.size(); i++) {
      out.set(i, new JoinedRow((InternalRow) out.get(i), bounds));
    }
    HANDED.put(key, out);
  }

  /** The rows handed over for buffer {@code key} at the time its tasks run ({@link #hand}),
   * in one partition, with the bounds as two more columns named {@code after} and {@code upto}:
   * a DataFrame planned once and run at every close (local mode, whose tasks run in the
   * driver's JVM). */
  public static Dataset handed(SparkSession spark, String key, String after, String upto) {
    GroupRows g = (GroupRows) HELD.get(key);
    StructType schema = g.schema
        .add(after, org.apache.spark.sql.types.DataTypes.LongType, false)
        .add(upto, org.apache.spark.sql.types.DataTypes.LongType, false);
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    ArrayList one = new ArrayList();
    one.add(Integer.valueOf(0));
    JavaRDD parts = PlainRdd.mapPartitions(jsc.parallelize(one, 1), new Handed(key));
    return spark.internalCreateDataFrame(parts.rdd(), schema, false);
  }

  /** The held rows of {@code batches} (their ids, comma-separated) whose event time is in
   * {@code [from, upto)}. */
  synchronized ArrayList chosen(String batches, long from, long upto) {
    HashSet wanted = new HashSet();
    String[] ids = batches.split(",");
    for (int i = 0; i < ids.length; i++) {
      wanted.add(Long.valueOf(Long.parseLong(ids[i])));
    }
    ArrayList out = new ArrayList();
    Map range = from == Long.MIN_VALUE
        ? panes.headMap(Long.valueOf(upto), false)
        : panes.subMap(Long.valueOf(pane(from)), true, Long.valueOf(Math.max(upto, from)), false);
    Iterator it = range.values().iterator();
    while (it.hasNext()) {
      List kept = (List) it.next();
      for (int i = 0; i < kept.size(); i++) {
        Kept k = (Kept) kept.get(i);
        if (k.ts >= from && k.ts < upto && wanted.contains(Long.valueOf(k.batch))) {
          out.add(k.row);
        }
      }
    }
    return out;
  }

  /** {@code frame}'s rows as an RDD's, made when they are read: a plan a sink's {@link
   * BatchWrite} takes. */
  public static Dataset asRows(Dataset frame, SparkSession spark) {
    return spark.internalCreateDataFrame(frame.queryExecution().toRdd(), frame.schema(), false);
  }

  /** Lets go of buffer {@code key}'s panes that end at or before {@code below}: their rows are
   * in closed windows only. */
  public static void forget(String key, long below) {
    GroupRows g = (GroupRows) HELD.get(key);
    if (g == null) {
      return;
    }
    Iterator it = g.panes.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry e = (Map.Entry) it.next();
      if (((Long) e.getKey()).longValue() + g.slide > below) {
        break;
      }
      it.remove();
    }
  }

  /** Lets go of every buffer whose key starts with {@code prefix}. */
  public static void drop(String prefix) {
    Iterator it = HELD.keySet().iterator();
    while (it.hasNext()) {
      if (((String) it.next()).startsWith(prefix)) {
        it.remove();
      }
    }
    it = HANDED.keySet().iterator();
    while (it.hasNext()) {
      if (((String) it.next()).startsWith(prefix)) {
        it.remove();
      }
    }
  }

  /** The rows handed over for buffer {@code key} ({@link #hand}), read where they are. */
  static final class Handed implements FlatMapFunction {
    final String key;

    Handed(String key) {
      this.key = key;
    }

    public Iterator call(Object ignored) {
      List rows = (List) HANDED.get(key);
      if (rows == null) {
        throw new IllegalStateException("streamjoin: no held rows of " + key + " to read");
      }
      return rows.iterator();
    }
  }

  static GroupRows held(String key, int time, long slide, StructType given) {
    // (Columns' types and names only: one batch's plan may carry metadata another's lacks, as
    // an event-time column's watermark.)
    org.apache.spark.sql.types.StructField[] fields = given.fields();
    org.apache.spark.sql.types.StructField[] plain =
        new org.apache.spark.sql.types.StructField[fields.length];
    for (int i = 0; i < fields.length; i++) {
      plain[i] = new org.apache.spark.sql.types.StructField(
          fields[i].name(), fields[i].dataType(), true,
          org.apache.spark.sql.types.Metadata.empty());
    }
    StructType schema = new StructType(plain);
    GroupRows g = (GroupRows) HELD.get(key);
    if (g == null || !g.schema.equals(schema)) {
      g = new GroupRows(time, slide, schema);
      HELD.put(key, g);
    }
    return g;
  }

  long pane(long ts) {
    return ts - Math.floorMod(ts, slide);
  }

  /** Holds the rows the tasks returned ({@link HeldCopies.Tee}'s) as batch {@code batch}'s
   * (-1: each row's own, as the tasks read it), in place of any held before for those batches;
   * the figures of {@link #writeAll}. */
  synchronized long[] replace(long batch, List parts) {
    HashSet ids = new HashSet();
    for (int p = 0; p < parts.size(); p++) {
      long[] of = (long[]) ((Object[]) parts.get(p))[3];
      for (int i = 0; i < of.length; i++) {
        ids.add(Long.valueOf(batch >= 0 ? batch : of[i]));
      }
    }
    ids.add(Long.valueOf(batch));
    ids.retainAll(batches);
    if (!ids.isEmpty()) {  // (a batch run again, or a unit held before)
      Iterator panesIt = panes.values().iterator();
      while (panesIt.hasNext()) {
        List kept = (List) panesIt.next();
        for (int i = kept.size() - 1; i >= 0; i--) {
          if (ids.contains(Long.valueOf(((Kept) kept.get(i)).batch))) {
            kept.remove(i);
          }
        }
      }
      batches.removeAll(ids);
    }
    long n = 0;
    long lo = Long.MAX_VALUE;
    long hi = Long.MIN_VALUE;
    for (int p = 0; p < parts.size(); p++) {
      Object[] part = (Object[]) parts.get(p);
      n += ((Long) part[0]).longValue();
      List rows = (List) part[1];
      long[] times = (long[]) part[2];
      long[] of = (long[]) part[3];
      for (int i = 0; i < rows.size(); i++) {
        long ts = times[i];
        lo = Math.min(lo, ts);
        hi = Math.max(hi, ts);
        Long start = Long.valueOf(pane(ts));
        List kept = (List) panes.get(start);
        if (kept == null) {
          kept = new ArrayList();
          panes.put(start, kept);
        }
        long id = batch >= 0 ? batch : of[i];
        kept.add(new Kept(id, ts, (InternalRow) rows.get(i)));
        batches.add(Long.valueOf(id));
      }
    }
    if (batch >= 0) {
      batches.add(Long.valueOf(batch));
    }
    return new long[] {n, lo, hi};
  }
}
